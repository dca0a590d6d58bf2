//! Real Git repositories for tests: made with the `git` program, read through
//! `file://` or served by `git daemon` on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::unique_name;

/// A repository with a `main` branch in a temporary folder.
#[derive(Debug)]
pub struct GitRepo {
    pub dir: PathBuf,
}

impl GitRepo {
    /// A new, empty repository.
    pub fn new(prefix: &str) -> Self {
        Self::new_at(
            std::env::temp_dir()
                .join(unique_name(prefix))
                .join("repo.git"),
        )
    }

    /// A new, empty repository whose objects are named by SHA-256 (64 hex
    /// digits), as `git init --object-format=sha256` makes it.
    pub fn new_sha256(prefix: &str) -> Self {
        let dir = std::env::temp_dir()
            .join(unique_name(prefix))
            .join("repo.git");
        std::fs::create_dir_all(&dir).expect("repo folder");
        let repo = Self { dir };
        repo.git(&["init", "-q", "--object-format=sha256", "-b", "main"]);
        repo.git(&["config", "user.email", "tests@stacksync.invalid"]);
        repo.git(&["config", "user.name", "stacksync tests"]);
        repo
    }

    /// A new, empty repository `name` in `base` (several repositories that
    /// one [`GitDaemon::serve_dir`] serves).
    pub fn new_in(base: &Path, name: &str) -> Self {
        Self::new_at(base.join(name))
    }

    fn new_at(dir: PathBuf) -> Self {
        std::fs::create_dir_all(&dir).expect("repo folder");
        let repo = Self { dir };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.email", "tests@stacksync.invalid"]);
        repo.git(&["config", "user.name", "stacksync tests"]);
        repo
    }

    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(&self.dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Writes files (path, content) and commits them; returns the commit SHA.
    pub fn commit(&self, files: &[(&str, &[u8])], message: &str) -> String {
        for (path, content) in files {
            let full = self.dir.join(path);
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent).expect("folder");
            }
            std::fs::write(full, content).expect("file written");
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// Commits `files` with an SSH signature by the private key at `key`
    /// (`git commit -S`, `gpg.format=ssh`); returns the commit SHA.
    pub fn commit_signed(&self, files: &[(&str, &[u8])], message: &str, key: &Path) -> String {
        for (path, content) in files {
            std::fs::write(self.dir.join(path), content).expect("file written");
        }
        self.git(&["add", "-A"]);
        let signing_key = format!("user.signingkey={}", key.display());
        self.git(&[
            "-c",
            "gpg.format=ssh",
            "-c",
            &signing_key,
            "commit",
            "-q",
            "--allow-empty",
            "-S",
            "-m",
            message,
        ]);
        self.head()
    }

    /// Commits a symbolic link `path` → `target`; returns the commit SHA.
    pub fn link(&self, path: &str, target: &str, message: &str) -> String {
        let full = self.dir.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).expect("folder");
        }
        let _ = std::fs::remove_file(&full);
        std::os::unix::fs::symlink(target, &full).expect("link made");
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.head()
    }

    /// Commits a submodule entry (a gitlink to `commit`) at `path`, as a
    /// superproject records one; returns the commit SHA.
    pub fn gitlink(&self, path: &str, commit: &str, message: &str) -> String {
        self.git(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{commit},{path}"),
        ]);
        self.git(&["commit", "-q", "-m", message]);
        self.head()
    }

    /// Sets a configuration value of the repository (what its server allows).
    pub fn config(&self, key: &str, value: &str) {
        self.git(&["config", key, value]);
    }

    /// Removes a file and commits; returns the commit SHA.
    pub fn remove(&self, path: &str, message: &str) -> String {
        self.git(&["rm", "-q", path]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }

    /// The commit `main` is at.
    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    /// `file:///…/repo.git`.
    pub fn file_url(&self) -> String {
        format!("file://{}", self.dir.display())
    }
}

/// `git daemon` on 127.0.0.1, serving the repositories under one folder; stopped on drop.
#[derive(Debug)]
pub struct GitDaemon {
    child: Child,
    port: u16,
    base: PathBuf,
}

impl GitDaemon {
    /// Serves `repo`'s parent folder (read-only).
    pub fn serve(repo: &GitRepo) -> Self {
        Self::serve_dir(repo.dir.parent().expect("repo has a parent"))
    }

    /// Serves every repository in `base` (read-only).
    pub fn serve_dir(base: &Path) -> Self {
        let base = base.to_path_buf();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        // `git daemon` forks `git-daemon`; killing `git` would leave the daemon
        // behind. Run `git-daemon` itself so that drop stops it.
        let exec_path = Command::new("git")
            .arg("--exec-path")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .expect("git --exec-path");
        let child = Command::new(Path::new(&exec_path).join("git-daemon"))
            .args([
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                "--reuseaddr",
                "--export-all",
                &format!("--base-path={}", base.display()),
                &base.display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "git daemon did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, port, base }
    }

    /// `git://127.0.0.1:PORT/repo.git`.
    pub fn url(&self, repo: &GitRepo) -> String {
        let name = repo.dir.strip_prefix(&self.base).expect("served repo");
        format!("git://127.0.0.1:{}/{}", self.port, name.display())
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An SSH key pair made by `ssh-keygen` in `dir`: the private key's path
/// and the public key's line.
pub fn signing_key(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
    let key = dir.join(name);
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen runs");
    assert!(status.success(), "ssh-keygen");
    let public = std::fs::read_to_string(key.with_extension("pub")).expect("the public key");
    (key, public.trim().to_owned())
}

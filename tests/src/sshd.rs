//! OpenSSH's `sshd` on 127.0.0.1 for tests, serving Git repositories over
//! SSH to one deploy key, with a host key of its own; stopped on drop.
//! `scripts/test` installs it (Debian's openssh-server) when it is missing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::git::GitRepo;
use crate::unique_name;

const SSHD: &str = "/usr/sbin/sshd";

/// A key pair made by ssh-keygen: (private key file text, public key line).
pub fn keygen(dir: &Path, name: &str) -> (String, String) {
    let path = dir.join(name);
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&path)
        .status()
        .expect("ssh-keygen runs");
    assert!(made.success(), "ssh-keygen made {name}");
    let private = std::fs::read_to_string(&path).expect("private key");
    let public = std::fs::read_to_string(path.with_extension("pub")).expect("public key");
    (private, public.trim().to_owned())
}

/// The server; stopped on drop.
#[derive(Debug)]
pub struct Sshd {
    child: Child,
    port: u16,
    dir: PathBuf,
    user: String,
    /// The deploy key it lets in (OpenSSH private key text).
    pub deploy_key: String,
    /// Its `knownHosts` line: `[127.0.0.1]:PORT ssh-ed25519 AAAA…`.
    pub known_hosts: String,
}

impl Sshd {
    /// Starts sshd, letting in one new deploy key.
    pub fn start() -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: scripts/test installs it (apt-get install openssh-server)"
        );
        let dir = std::env::temp_dir().join(unique_name("sshd"));
        std::fs::create_dir_all(&dir).expect("sshd folder");
        let (_, host_public) = keygen(&dir, "host_key");
        let (deploy_key, deploy_public) = keygen(&dir, "deploy");
        std::fs::write(dir.join("authorized_keys"), format!("{deploy_public}\n")).expect("keys");
        // Privilege separation wants its empty folder (as root).
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let user = whoami();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\nPidFile {dir}/sshd.pid\n\
             AuthorizedKeysFile {dir}/authorized_keys\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\nStrictModes no\n\
             PermitRootLogin prohibit-password\nAllowUsers {user}\nAcceptEnv GIT_PROTOCOL\n\
             SetEnv PATH=/usr/local/bin:/usr/bin:/bin\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("sshd_config"), config).expect("config");
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sshd starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "sshd did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let host_key = host_public
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        Sshd {
            child,
            port,
            dir,
            user,
            deploy_key,
            known_hosts: format!("[127.0.0.1]:{port} {host_key}\n"),
        }
    }

    /// `ssh://USER@127.0.0.1:PORT/ABSOLUTE/PATH` of a repository.
    pub fn url(&self, repo: &GitRepo) -> String {
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            self.user,
            self.port,
            repo.dir.display()
        )
    }

    /// A key pair the server does not know.
    pub fn stranger(&self) -> (String, String) {
        keygen(&self.dir, &unique_name("stranger"))
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn whoami() -> String {
    let out = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

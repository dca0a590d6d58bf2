//! The `stacksync` binary as a person runs it, against the emulator.
#![allow(dead_code, clippy::unwrap_used)] // each test file uses some of it

use std::path::PathBuf;
use std::process::{Command, Output};

use stacksync::registry::Registry;
use stacksync_testkit::backend::Backend;
use stacksync_testkit::{Emulator, unique_name};

/// A registry table of its own, and a folder for stacks files.
pub struct Cli {
    pub table: String,
    pub dir: PathBuf,
}

impl Cli {
    pub async fn new(prefix: &str) -> (Cli, Registry) {
        let registry = Emulator::shared().new_registry(prefix).await;
        let dir = std::env::temp_dir().join(unique_name(prefix));
        std::fs::create_dir_all(&dir).unwrap();
        (
            Cli {
                table: registry.table().to_owned(),
                dir,
            },
            registry,
        )
    }

    /// The command, its environment set, not started.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stacksync"));
        cmd.args(args)
            .env("STACKSYNC_TABLE", &self.table)
            .env_remove("AWS_PROFILE");
        Backend::Moto.configure(&mut cmd);
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("stacksync runs")
    }

    pub fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `stacksync ARGS` against the registry table `table`, off the
/// runtime (the tests that run the reconcile in-process beside it).
pub async fn stacksync_on(table: &str, args: &[&str]) -> Output {
    stacksync_with(Backend::Moto, table, args).await
}

/// The same, CloudFormation and S3 on `backend`.
pub async fn stacksync_with(backend: Backend, table: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stacksync"));
    cmd.args(args)
        .env("STACKSYNC_TABLE", table)
        .env_remove("AWS_PROFILE");
    backend.configure(&mut cmd);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

//! Real Guard rules written by others: AWS Control Tower's proactive
//! controls, fetched by `scripts/guard-rules` (npm, pinned and checked),
//! never committed. `STACKSYNC_GUARD_RULES` names their folder when the
//! test script fetched them already.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The folder of the rules (one folder per service: `s3/ct-s3-pr-1.guard`…).
pub fn folder() -> PathBuf {
    static FOLDER: OnceLock<PathBuf> = OnceLock::new();
    FOLDER
        .get_or_init(|| {
            if let Ok(dir) = std::env::var("STACKSYNC_GUARD_RULES")
                && !dir.is_empty()
            {
                return PathBuf::from(dir);
            }
            let script = crate::repo_root().join("scripts/guard-rules");
            let out = std::process::Command::new(&script)
                .output()
                .expect("scripts/guard-rules runs");
            assert!(
                out.status.success(),
                "scripts/guard-rules: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        })
        .clone()
}

/// One rule file's text (`s3/ct-s3-pr-1.guard`), as AWS wrote it.
pub fn rule(path: &str) -> Vec<u8> {
    let file = folder().join(path);
    std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

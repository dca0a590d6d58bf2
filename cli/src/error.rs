//! The CLI's error: a message for people. `main` prints it after `error: `
//! and exits 1, so every failure reads the same whichever command it came
//! from; a command whose failure is of another kind says so with
//! [`exit_with`] (`sync`: 3 when only entries outside its file failed).

use std::sync::atomic::{AtomicU8, Ordering};

pub type Result<T = ()> = std::result::Result<T, String>;

/// The exit code of a failed command: 1 unless it said otherwise.
static EXIT_CODE: AtomicU8 = AtomicU8::new(1);

/// The code the command's error exits with (not 0: an error is an error).
pub fn exit_with(code: u8) {
    EXIT_CODE.store(code.max(1), Ordering::Relaxed);
}

/// The code `main` exits with after printing the error.
pub fn exit_code() -> u8 {
    EXIT_CODE.load(Ordering::Relaxed)
}

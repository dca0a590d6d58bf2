//! The CLI's error: a message for people. `main` prints it after `error: `
//! and exits 1, so every failure reads the same whichever command it came from.

pub type Result<T = ()> = std::result::Result<T, String>;

//! The `posenc` binary that cargo builds for the tests (feature `cli`).

use std::process::{Command, Output};

/// A command that runs the `posenc` binary.
pub fn command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_posenc"))
}

/// `posenc args`, run to its end: exit status, stdout and stderr.
pub fn posenc(args: &[&str]) -> Output {
    command().args(args).output().expect("run posenc")
}

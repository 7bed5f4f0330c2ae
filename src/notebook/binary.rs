//! The `posenc` binary, run from a notebook: a notebook never compiles burn, so what needs a
//! trained model (evaluation, exports) runs the release binary that `make build` made and
//! reads the CSV it writes.

use std::path::Path;

use crate::{Error, Result};

fn io(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

/// The `posenc` binary with training (`make build`): `$POSENC_BIN` if set, else
/// `target/release/posenc` of this crate.
///
/// # Errors
/// [`Error::Io`] saying how to build it when it is missing.
pub fn posenc_binary() -> Result<std::path::PathBuf> {
    let path = std::env::var_os("POSENC_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/posenc"));
    if path.is_file() {
        Ok(path)
    } else {
        Err(io(
            &path,
            "not built: run `make build` in the repository root",
        ))
    }
}

/// Runs the `posenc` binary with `args` in the repository root; returns its standard output.
///
/// `args` is anything that iterates over strings or paths: `["eval", "--lengths", "128"]`,
/// a `Vec<String>`, or a mix through `OsString`s.
///
/// # Errors
/// [`Error::Io`] with the command's error line when it fails, or when it cannot start.
pub fn run_posenc<I, S>(args: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let args: Vec<std::ffi::OsString> = args
        .into_iter()
        .map(|a| a.as_ref().to_os_string())
        .collect();
    let bin = posenc_binary()?;
    let out = std::process::Command::new(&bin)
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| io(&bin, e))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let line = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let shown: Vec<_> = args.iter().map(|a| a.to_string_lossy()).collect();
        Err(Error::Io(format!("posenc {}: {line}", shown.join(" "))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_posenc_takes_any_strings_and_reports_failures() {
        // The only test that sets POSENC_BIN: /bin/echo stands in for the binary.
        std::env::set_var("POSENC_BIN", "/bin/echo");
        assert_eq!(
            run_posenc(["eval", "--lengths", "128"]).unwrap(),
            "eval --lengths 128\n"
        );
        let owned: Vec<String> = vec!["a".into(), format!("{}", 2)];
        assert_eq!(run_posenc(&owned).unwrap(), "a 2\n");
        let paths = [std::path::PathBuf::from("/tmp/x.csv")];
        assert_eq!(run_posenc(&paths).unwrap(), "/tmp/x.csv\n");
        std::env::set_var("POSENC_BIN", "/bin/false");
        let err = run_posenc(["train", "--steps", "1"]).unwrap_err();
        assert_eq!(err.to_string(), "posenc train --steps 1: ");
        std::env::set_var("POSENC_BIN", "/nonexistent/posenc");
        assert!(run_posenc(["x"])
            .unwrap_err()
            .to_string()
            .contains("make build"));
        std::env::remove_var("POSENC_BIN");
    }
}

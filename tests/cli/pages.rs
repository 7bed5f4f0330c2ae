//! The command lines `docs/usage.md` shows run as written, and its and the README's
//! `posenc rope --config` examples are that command's output (the library example is a doc
//! test of the crate).

use crate::support::cli::posenc;

/// The lines of the fenced block that follows `opening` (e.g. "```sh") at its `nth` place.
fn block(page: &str, opening: &str, nth: usize) -> Vec<String> {
    let text = std::fs::read_to_string(format!("{}/{page}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let start = text
        .match_indices(&format!("{opening}\n"))
        .nth(nth)
        .unwrap_or_else(|| panic!("{page}: no block {opening} number {nth}"))
        .0;
    text[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_usage_pages_dump_commands_run_as_written() {
    let prefix = "cargo run --release --features cli -- ";
    let lines = block("docs/usage.md", "```sh", 0);
    let commands: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix(prefix))
        .collect();
    assert_eq!(commands.len(), lines.len(), "every line runs the binary");
    assert!(commands.len() >= 5);
    for command in commands {
        let args: Vec<&str> = command.split_whitespace().collect();
        let out = posenc(&args);
        assert!(
            out.status.success() && !out.stdout.is_empty(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The `posenc rope --config` examples of `docs/usage.md` and of the README are that command's
/// output: each line shown is a line it prints, in the order printed (the usage page shows the
/// first lines; the README a few of them), then one line standing for the rest.
#[test]
fn the_rope_examples_are_the_commands_output() {
    for page in ["docs/usage.md", "README.md"] {
        let example = block(page, "```text", 0);
        let command = example[0]
            .strip_prefix("$ posenc ")
            .unwrap_or_else(|| panic!("{page}: a command line first"));
        let args: Vec<&str> = command.split_whitespace().collect();
        let config = format!("{}/{}", env!("CARGO_MANIFEST_DIR"), args[2]);
        let out = posenc(&[args[0], args[1], &config]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8(out.stdout).unwrap();
        let mut printed = printed.lines().map(str::trim_end);
        let shown = &example[1..example.len() - 1];
        assert!(example.last().unwrap().starts_with("..."), "{page}");
        assert!(shown.len() >= 4, "{page}: too short an example");
        for (i, line) in shown.iter().enumerate() {
            let want = match i {
                0 => line.replace(args[2], &config),
                _ => line.clone(),
            };
            assert!(
                printed.any(|p| p == want.trim_end()),
                "{page}: line {} is not printed (or not in this order): {want}",
                i + 1
            );
        }
    }
}

//! The command lines `docs/usage.md` shows run as written, and its `posenc rope --config`
//! example is that command's output (the library example is a doc test of the crate).

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

#[test]
fn the_usage_pages_rope_example_is_the_commands_output() {
    let example = block("docs/usage.md", "```text", 0);
    let command = example[0]
        .strip_prefix("$ posenc ")
        .expect("a command line first");
    let args: Vec<&str> = command.split_whitespace().collect();
    let config = format!("{}/{}", env!("CARGO_MANIFEST_DIR"), args[2]);
    let out = posenc(&[args[0], args[1], &config]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let printed: Vec<&str> = printed.lines().collect();
    // the page shows the first lines as printed, then one line standing for the rest
    let shown = &example[1..example.len() - 1];
    assert!(example.last().unwrap().starts_with("..."));
    for (i, line) in shown.iter().enumerate() {
        let want = if i == 0 {
            line.replace(args[2], &config)
        } else {
            line.clone()
        };
        assert_eq!(printed[i].trim_end(), want.trim_end(), "line {}", i + 1);
    }
}

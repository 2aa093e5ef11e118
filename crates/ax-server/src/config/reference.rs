//! The configuration reference (`docs/configuration.md`), rendered from the declarations:
//! one table of every setting, one of the design document's keys. `tests/docs.rs` keeps the
//! committed page equal to it.

use super::{ALIASES, SETTINGS};

/// A row of a Markdown table; an empty cell is `| |`.
fn row<const N: usize>(cells: [String; N]) -> String {
    let mut line = String::from("|");
    for cell in cells {
        match cell.is_empty() {
            true => line.push_str(" |"),
            false => line.push_str(&format!(" {cell} |")),
        }
    }
    line
}

/// Every setting: key, environment variable, default, range and meaning, in declaration order.
pub fn settings_table() -> String {
    let mut table = vec![
        "| key | env variable | default | range | meaning |".to_string(),
        "|---|---|---|---|---|".to_string(),
    ];
    for setting in SETTINGS {
        let env = match setting.env {
            Some(name) if setting.kind.is_list() => format!("`{name}` (comma-separated)"),
            Some(name) => format!("`{name}`"),
            None => "(file only)".to_string(),
        };
        table.push(row([
            format!("`{}`", setting.key),
            env,
            setting.default_shown(),
            setting.kind.describe(),
            setting.doc.to_string(),
        ]));
    }
    table.join("\n") + "\n"
}

/// The design document's keys: what each sets and how.
pub fn aliases_table() -> String {
    let mut table = vec![
        "| design document's key | sets | how |".to_string(),
        "|---|---|---|".to_string(),
    ];
    for alias in ALIASES {
        table.push(row([
            format!("`{}`", alias.key),
            format!("`{}`", alias.sets),
            alias.doc.to_string(),
        ]));
    }
    table.join("\n") + "\n"
}

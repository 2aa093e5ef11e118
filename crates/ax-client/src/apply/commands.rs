//! The commands: `ax apply` (the plan printed, then written, deletes asked for), `ax diff`
//! (the plan printed, its exit status saying whether there is one) and `ax executors apply`
//! (a file of groups put as it is). Each ends through [`ApplyError::report`].

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use super::error::ApplyError;
use super::groups::GroupEntry;
use super::prepare::{prepare, Prepared};
use super::read::{read_groups_file, read_tasks};
use super::section::EXECUTORS;
use super::server::{put_entry, stored_groups};
use super::write::write;
use crate::Connection;

/// `ax diff`'s exit status when the file and the store differ (0 when they do not, 2 for a
/// bad file or option).
const EXIT_DIFFERENCES: u8 = 1;

/// `ax diff`'s exit status when the server cannot be reached or refuses a request: not 1,
/// which says the two differ.
const EXIT_UNREACHABLE: u8 = 3;

/// How `ax apply` goes about it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApplyOptions {
    /// Print the plan; change nothing.
    pub dry_run: bool,
    /// Delete the tasks of the file's scenes that it does not have.
    pub prune: bool,
    /// Delete without asking.
    pub yes: bool,
}

/// Runs `ax apply`: prints the plan's lines, then (unless a dry run) writes it and prints the
/// count. Exit 2 for a bad file, or deletes without `--yes` off a terminal; 1 when the
/// server refuses or cannot be reached, or the deletes are not confirmed.
pub fn apply(conn: Connection, file: &Path, options: ApplyOptions) -> ExitCode {
    let outcome = read_tasks(file).and_then(|read| {
        actix_rt::System::new().block_on(async {
            let prepared = prepare(&conn, read, options.prune).await?;
            apply_prepared(&conn, prepared, options).await
        })
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => err.report("ax apply", 1),
    }
}

async fn apply_prepared(
    conn: &Connection,
    prepared: Prepared,
    options: ApplyOptions,
) -> Result<(), ApplyError> {
    let plan = &prepared.plan;
    plan.lines().iter().for_each(|line| println!("{line}"));
    if plan.is_empty() {
        println!("{}", plan.no_change());
        return Ok(());
    }
    if options.dry_run {
        println!("{}", plan.count(true));
        return Ok(());
    }
    let deletes = plan.delete.len();
    match consent(deletes, options.yes, std::io::stdin().is_terminal()) {
        Consent::Given => {}
        Consent::Ask if ask_to_delete(deletes) => {}
        Consent::Ask => return Err(ApplyError::Declined),
        Consent::Missing => return Err(ApplyError::PruneWithoutYes { deletes }),
    }
    write(conn, &prepared).await?;
    println!("{}", plan.count(false));
    Ok(())
}

/// Whether `--prune`'s deletes may go ahead.
#[derive(Debug, PartialEq, Eq)]
enum Consent {
    Given,
    /// Ask on the terminal.
    Ask,
    /// No terminal to ask on, and no `--yes`.
    Missing,
}

/// Deleting asks first, on a terminal, unless `--yes` says to go ahead.
fn consent(deletes: usize, yes: bool, terminal: bool) -> Consent {
    match (deletes, yes, terminal) {
        (0, _, _) | (_, true, _) => Consent::Given,
        (_, false, true) => Consent::Ask,
        (_, false, false) => Consent::Missing,
    }
}

/// Asks `Delete N tasks? [y/N]` on the terminal: whether the answer is yes.
fn ask_to_delete(deletes: usize) -> bool {
    eprint!("Delete {deletes} tasks? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    match std::io::stdin().lock().read_line(&mut answer) {
        Ok(_) => matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"),
        Err(_) => false,
    }
}

/// Runs `ax diff`: prints the lines `apply` would print, without the count; exit 0 when
/// there are none, 1 when there are, 2 for a bad file, 3 when the server refuses or cannot be
/// reached.
pub fn diff(conn: Connection, file: &Path, prune: bool) -> ExitCode {
    let outcome = read_tasks(file)
        .and_then(|read| actix_rt::System::new().block_on(prepare(&conn, read, prune)));
    match outcome {
        Ok(prepared) if prepared.plan.is_empty() => ExitCode::SUCCESS,
        Ok(prepared) => {
            prepared
                .plan
                .lines()
                .iter()
                .for_each(|line| println!("{line}"));
            ExitCode::from(EXIT_DIFFERENCES)
        }
        Err(err) => err.report("ax diff", EXIT_UNREACHABLE),
    }
}

/// Runs `ax executors apply`: PUTs every group of the file, printing `+ NAME (created)` or
/// `~ NAME (replaced)` for each, then a count. Exit 2 for a bad file, 1 when the server
/// refuses or cannot be reached.
pub fn apply_groups(conn: Connection, file: &Path) -> ExitCode {
    let outcome = read_groups_file(file)
        .and_then(|groups| actix_rt::System::new().block_on(put_groups(&conn, &groups)));
    match outcome {
        Ok(lines) => {
            lines.iter().for_each(|line| println!("{line}"));
            ExitCode::SUCCESS
        }
        Err(err) => err.report("ax executors apply", 1),
    }
}

/// Puts every group: the lines `ax executors apply` prints.
async fn put_groups(conn: &Connection, groups: &[GroupEntry]) -> Result<Vec<String>, ApplyError> {
    let stored = stored_groups(conn).await?;
    let mut lines = Vec::with_capacity(groups.len() + 1);
    for group in groups {
        put_entry(conn, &EXECUTORS, group).await?;
        lines.push(match stored.contains_key(group.name.as_str()) {
            true => format!("~ {} (replaced)", group.name),
            false => format!("+ {} (created)", group.name),
        });
    }
    let replaced = groups
        .iter()
        .filter(|group| stored.contains_key(group.name.as_str()))
        .count();
    lines.push(format!(
        "{} created, {replaced} replaced",
        groups.len() - replaced
    ));
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletes_ask_on_a_terminal_and_need_yes_off_one() {
        assert_eq!(consent(0, false, false), Consent::Given);
        assert_eq!(consent(3, true, false), Consent::Given);
        assert_eq!(consent(3, false, true), Consent::Ask);
        assert_eq!(consent(3, false, false), Consent::Missing);
    }
}

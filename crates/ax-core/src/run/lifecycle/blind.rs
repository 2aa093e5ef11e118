//! Writes decided without reading the row, for many runs in one statement.

use super::changes::{deleted, finish, replaced, running};
use super::event::{Event, Outcome, Report};
use super::row::{Change, Expect, Write};
use crate::run::status::{RunStatus, DISPATCHABLE, OPEN};

/// The write of an event that needs no read of the row: its condition says when it applies,
/// and wherever it holds the write is exactly what [`on_event`](super::on_event) decides.
/// Used to apply many dispatch replies, or a deleted task's open runs, in one statement.
pub fn blind(event: &Event) -> Option<Write> {
    match event {
        // A SUCCESS ends any open run it was dispatched for (see `on_report`); one for an
        // attempt never dispatched is refused there, so it must not hold here either.
        Event::Report(
            report @ Report {
                attempt: Some(attempt),
                outcome: Outcome::Succeeded { code, message },
                at,
                ..
            },
        ) if *attempt >= 1 => Some(Write {
            expect: Expect {
                dispatched_at_least: Some(*attempt),
                ..Expect::status(DISPATCHABLE)
            },
            change: Change {
                dispatched_at: report.first_dispatch(*attempt),
                member: report.member.clone(),
                ..finish(RunStatus::Success, code.clone(), message.clone(), *at)
            },
        }),
        Event::Report(
            report @ Report {
                attempt: Some(attempt),
                outcome: Outcome::Accepted { deadline },
                ..
            },
        ) => Some(Write {
            expect: Expect {
                attempt: Some(*attempt),
                dispatched: Some(*attempt),
                ..Expect::status(RunStatus::Ready.only())
            },
            change: Change {
                dispatched_at: report.first_dispatch(*attempt),
                member: report.member.clone(),
                ..running(*deadline)
            },
        }),
        // A deleted task's runs, and replaced ones, end the same way in every open state.
        Event::TaskDeleted { at } => Some(Write {
            expect: Expect::status(OPEN),
            change: deleted(*at),
        }),
        Event::Replaced { at } => Some(Write {
            expect: Expect::status(OPEN),
            change: replaced(*at),
        }),
        _ => None,
    }
}

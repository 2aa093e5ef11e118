//! Every task field reaches `ax apply`'s plan, the audit diff and the stored definition.

use ax_core::calendar::CalendarBook;
use ax_core::task::fields::{Default, ALL, NAME, SCENE};
use ax_server::api::validate::task_examples::{details, input, required, stored, with_example};

#[test]
fn every_field_is_in_the_audit_diff_the_apply_plan_and_the_stored_definition() {
    let plain = input(required());
    let (now, book) = (chrono::DateTime::UNIX_EPOCH, CalendarBook::default());
    let stored_plain = stored(plain.fields(now, &book));
    assert!(plain.fields(now, &book).defines(&stored_plain));
    for field in ALL {
        let changed = input(with_example(field));
        let apply = super::changed_fields(&changed, &plain);
        // The alternative the smallest body gives is left out for this one.
        let replaced = match field.default {
            Default::Either(other) if required().get(other).is_some() => Some(other),
            _ => None,
        };
        // Tasks of a file are matched to stored ones by (scene, name).
        match [NAME.name, SCENE.name].contains(&field.name) {
            true => assert!(apply.is_empty(), "{}: {apply:?}", field.name),
            false => {
                let mut expected: Vec<&str> = replaced.into_iter().collect();
                expected.push(field.name);
                assert_eq!(apply, expected);
            }
        }
        if field.column.is_none() {
            // Upstreams are kept, and audited, beside the row (`Service::update_task`).
            continue;
        }
        assert!(
            !changed.fields(now, &book).defines(&stored_plain),
            "{}: a bulk upsert would leave it unchanged",
            field.name
        );
        let (before, after) = (details(&plain).task, details(&changed).task);
        let summary = ax_server::service::audit_diff::task_changes(&before, &after);
        let audited = match field.name {
            "enabled" => "status",
            name => name,
        };
        let alone = replaced.is_none() && !summary.contains("; ");
        assert!(
            summary.contains(&format!("{audited}: ")) && (alone || replaced.is_some()),
            "{}: {summary}",
            field.name
        );
    }
}

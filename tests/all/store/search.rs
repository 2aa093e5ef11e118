//! `crates/ax-store/src/queries/search.rs`: runs by the start of their request id (one range of the
//! request-id index, read from its end), tasks by text in their `scene/name`.

use ax_core::run::{RequestId, RequestIdPrefix, RunStatus};
use ax_core::task::search::TaskMatch;
use ax_store::queries::search;
use ax_store::rows::models::TaskStatus;
use ax_store::{Conn, Db};

use crate::store::support::{
    base, conn, fields, insert_run, insert_task, new_instance, on_every_backend, secs,
};

on_every_backend!(
    runs_by_the_start_of_their_request_id,
    tasks_by_text_in_scene_or_name
);

async fn runs_by_the_start_of_their_request_id(db: &Db) {
    let task = insert_task(db, fields("prefixed", "s1", TaskStatus::Enabled, None)).await;
    // A run a minute over ten hours: the first 12 hex digits of a scheduled run's id are its
    // time in ms, so six digits (4.7 hours) name many of them, thirteen characters one.
    let mut ids = Vec::new();
    for n in 0..600 {
        let at = base() + secs(60 * n);
        let id = RequestId::scheduled(task.id, ax_store::from_db(at));
        insert_run(db, &new_instance(task.id, &id, at, RunStatus::Success)).await;
        ids.push(id);
    }
    let target = &ids[321];
    let found = |prefix: &str, limit: i64| {
        let prefix = RequestIdPrefix::parse(prefix).expect("a prefix");
        async move {
            let mut c = conn(db).await;
            // Reading the counters reads rows too: as many as between these two reads.
            let first = index_reads(&mut c).await;
            let before = index_reads(&mut c).await;
            let runs = search::runs_by_prefix(&mut c, &prefix, limit)
                .await
                .expect("runs by prefix");
            let after = index_reads(&mut c).await;
            let reads = match (first, before, after) {
                (Some(first), Some(before), Some(after)) => Some(after - before - (before - first)),
                _ => None,
            };
            let ids: Vec<RequestId> = runs.into_iter().map(|run| run.request_id).collect();
            (ids, reads)
        }
    };

    let (one, _) = found(&target.as_str()[..13], 10).await;
    assert_eq!(one, vec![target.clone()]);
    let bare: String = target.as_str()[..13].replace('-', "").to_uppercase();
    assert_eq!(
        found(&bare, 10).await.0,
        vec![target.clone()],
        "as copied, any case"
    );

    let start = &target.as_str()[..6];
    let mut named: Vec<RequestId> = ids
        .iter()
        .filter(|id| id.as_str().starts_with(start))
        .cloned()
        .collect();
    assert!(named.len() > 20, "six digits name many: {}", named.len());
    named.sort();
    named.reverse();
    let (latest, reads) = found(start, 10).await;
    assert_eq!(latest, named[..10].to_vec(), "the latest made first");
    // On MariaDB, the rows read: a range of the index from its end, not a scan of the runs.
    if let Some(reads) = reads {
        assert!(reads <= 12, "{reads} rows read for 10 runs");
    }
    assert!(found("ffffff", 10).await.0.is_empty());
}

/// On MariaDB, the rows this session has read so far from tables and indexes (every
/// `Handler_read_*` counter: a scan counts each row it reads); none on SQLite.
async fn index_reads(conn: &mut Conn) -> Option<i64> {
    use diesel::sql_types::Text;
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Status {
        #[diesel(sql_type = Text, column_name = "Value")]
        value: String,
    }
    let Conn::Mysql(c) = conn else {
        return None;
    };
    let rows: Vec<Status> = diesel::sql_query(
        "SELECT VARIABLE_VALUE AS Value FROM information_schema.SESSION_STATUS \
         WHERE VARIABLE_NAME IN ('HANDLER_READ_NEXT', 'HANDLER_READ_PREV', \
         'HANDLER_READ_RND_NEXT', 'HANDLER_READ_FIRST', 'HANDLER_READ_LAST', 'HANDLER_READ_KEY')",
    )
    .load(&mut **c)
    .await
    .expect("session status");
    Some(
        rows.iter()
            .filter_map(|row| row.value.parse::<i64>().ok())
            .sum(),
    )
}

async fn tasks_by_text_in_scene_or_name(db: &Db) {
    for (scene, name) in [
        ("billing", "charge-cards"),
        ("billing", "refund_50%"),
        ("billing", "refund-50"),
        ("Reports", "nightly"),
        ("ops", "a/b"),
    ] {
        insert_task(db, fields(name, scene, TaskStatus::Enabled, None)).await;
    }
    let found = |text: &'static str| async move {
        search::tasks_matching(&mut conn(db).await, &TaskMatch::of(text), 10)
            .await
            .expect("tasks matching")
            .into_iter()
            .map(|task| format!("{}/{}", task.scene, task.name))
            .collect::<Vec<String>>()
    };
    assert_eq!(
        found("CHARGE").await,
        vec!["billing/charge-cards"],
        "any case"
    );
    assert_eq!(
        found("ling/charge").await,
        vec!["billing/charge-cards"],
        "across the slash"
    );
    assert_eq!(
        found("_50%").await,
        vec!["billing/refund_50%"],
        "wildcards as text"
    );
    assert_eq!(
        found("reports").await,
        vec!["Reports/nightly"],
        "in the scene"
    );
    assert_eq!(found("a/b").await, vec!["ops/a/b"], "a slash in the name");
    assert_eq!(found("ops/a/").await, vec!["ops/a/b"]);
    assert_eq!(
        found("billing/").await,
        vec![
            "billing/charge-cards",
            "billing/refund-50",
            "billing/refund_50%"
        ],
        "by scene and name"
    );
    assert!(found("nothing-like-it").await.is_empty());
}

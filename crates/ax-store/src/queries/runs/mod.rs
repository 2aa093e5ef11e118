//! Run rows: recording fires (new runs, `fires`) and backfills (`backfill`), and the run
//! history (`history`).

mod backfill;
mod fires;
mod history;

pub use backfill::{backfill, last_backfill_due, Backfilled};
pub use fires::{insert_run, record_fires, FireOutcome, FireRecord};
pub use history::{
    count_open, delete_finished_before, find_by_request_id, for_stats, history, list_for_task,
    shards_of, Cursor, RunFilter, StatsRow,
};

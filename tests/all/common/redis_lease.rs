//! Redis databases of a test's own: every test store numbers its tasks from 1, and fire locks
//! (`ax:lock:{taskId}`) of tests running side by side on one Redis database would refuse each
//! other's fires. A test leases databases 1 to 15 (emptied as they are leased) and gives them
//! back when its [`TestSystem`](super::TestSystem) ends; database 0 is left to what fires
//! nothing (the design's file names it, and the lock tests' ids are random).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use super::redis_server;

/// Every database a test may lease, the one given back longest ago first.
static FREE: LazyLock<Mutex<VecDeque<u8>>> = LazyLock::new(|| Mutex::new((1..=15).collect()));

thread_local! {
    /// The databases this thread's test holds.
    static HELD: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A Redis database for this test alone, empty, until the test ends.
pub fn redis_database() -> u8 {
    super::system::assert_in_test_system("a Redis database");
    let deadline = Instant::now() + Duration::from_secs(60);
    let database = loop {
        if let Some(database) = free().pop_front() {
            break database;
        }
        // Tests run two or three at a time: a wait means one holds more than it should.
        assert!(Instant::now() < deadline, "no Redis database free for 60 s");
        std::thread::sleep(Duration::from_millis(100));
    };
    HELD.with_borrow_mut(|held| held.push(database));
    let url = format!("{}/{database}", redis_server());
    let flushed = redis::Client::open(url.as_str())
        .and_then(|client| client.get_connection())
        .and_then(|mut conn| redis::cmd("FLUSHDB").query::<()>(&mut conn));
    if let Err(err) = flushed {
        panic!("empty Redis database {url}: {err}");
    }
    database
}

/// The URL of [`redis_database`].
pub fn redis_url() -> String {
    format!("{}/{}", redis_server(), redis_database())
}

/// Gives back every database the test held (it has stopped using them).
pub(super) fn release_all() {
    let held = HELD.take();
    free().extend(held);
}

fn free() -> std::sync::MutexGuard<'static, VecDeque<u8>> {
    FREE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

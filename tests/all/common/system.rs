//! The actix system every async test runs in, and the end of everything the test started.
//!
//! actix keeps each arbiter thread (ax's store actor has one, every HTTP server's workers too)
//! until its system is told to stop, and `#[actix_rt::test(system = "crate::common::TestSystem")]`'s system never is: what a test
//! started outlived it. When each test file was a process of its own, its exit ended them; in
//! one process they pile up, ax after ax still firing, and MariaDB soon refuses connections. So
//! every async test names this system:
//!
//! ```ignore
//! #[actix_rt::test(system = "crate::common::TestSystem")]
//! ```
//!
//! When the test ends, passed or failed, its system stops: every arbiter, then the runtime with
//! every task on it. Whatever the test started goes with them, shut down or not — each ax, its
//! actors, pools and HTTP server, executors, proxies and connections — and the Redis databases
//! it leased are free for the next test.

use std::cell::Cell;
use std::future::Future;

thread_local! {
    /// Whether this thread runs a test in a [`TestSystem`].
    static IN_TEST_SYSTEM: Cell<bool> = const { Cell::new(false) };
}

/// An actix system that stops everything its test started when the test ends.
pub struct TestSystem(actix_rt::SystemRunner);

impl TestSystem {
    #[allow(clippy::new_without_default)] // what `#[actix_rt::test(system = …)]` calls
    pub fn new() -> TestSystem {
        TestSystem(actix_rt::System::new())
    }

    /// Runs `test` to its end, then stops the system; a failed test fails after that.
    pub fn block_on<F>(self, test: F) -> F::Output
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let runner = self.0;
        IN_TEST_SYSTEM.set(true);
        // A task of its own: its panic ends the task, dropping what the test held, and leaves
        // the runtime to stop the rest.
        let outcome = runner.block_on(async { actix_rt::spawn(test).await });
        actix_rt::System::current().stop();
        // Tells every arbiter to stop, then drops the runtime and every task on it.
        let stopped = runner.run();
        IN_TEST_SYSTEM.set(false);
        super::redis_lease::release_all();
        match outcome {
            Ok(output) => {
                stopped.expect("the test's system stops");
                output
            }
            Err(failure) => match failure.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(failure) => panic!("the test did not finish: {failure}"),
            },
        }
    }
}

/// Fails the test unless it runs in a [`TestSystem`]: in another, what `what` starts would
/// outlive it.
pub fn assert_in_test_system(what: &str) {
    assert!(
        IN_TEST_SYSTEM.get(),
        "{what} needs the test's system: #[actix_rt::test(system = \"crate::common::TestSystem\")]"
    );
}

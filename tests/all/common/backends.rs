//! A scenario run on each store ax speaks: written once as `async fn(TestStore)`, it becomes
//! two tests, one on a fresh SQLite file and one on a fresh MariaDB database.

/// `on_each_backend!(scenario, sqlite: name_on_sqlite, mariadb: name_on_mariadb);` declares
/// the two tests of `scenario`, each named as given (the names filters and docs know them by).
macro_rules! on_each_backend {
    ($scenario:path, sqlite: $sqlite:ident, mariadb: $mariadb:ident $(,)?) => {
        #[actix_rt::test(system = "crate::common::TestSystem")]
        async fn $sqlite() {
            $scenario($crate::common::TestStore::sqlite()).await;
        }

        #[actix_rt::test(system = "crate::common::TestSystem")]
        async fn $mariadb() {
            $scenario($crate::common::TestStore::mysql()).await;
        }
    };
}

pub(crate) use on_each_backend;

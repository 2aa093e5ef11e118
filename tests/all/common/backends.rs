//! A scenario run on each store ax speaks: written once as `async fn(TestStore)`, it becomes
//! three tests, one on a fresh SQLite file, one on a fresh MariaDB database and one on a fresh
//! PostgreSQL database (or the last two only, for a cluster's scenario).

/// `on_each_backend!(scenario, sqlite: name_on_sqlite, mariadb: name_on_mariadb, postgres:
/// name_on_postgres);` declares the three tests of `scenario`, each named as given (the names
/// filters and docs know them by). Without `sqlite:`, the two tests on a database server, for
/// a scenario of several processes sharing one store.
macro_rules! on_each_backend {
    ($scenario:path, mariadb: $mariadb:ident, postgres: $postgres:ident $(,)?) => {
        #[actix_rt::test(system = "crate::common::TestSystem")]
        async fn $mariadb() {
            $scenario($crate::common::TestStore::mysql()).await;
        }

        #[actix_rt::test(system = "crate::common::TestSystem")]
        async fn $postgres() {
            $scenario($crate::common::TestStore::postgres()).await;
        }
    };
    ($scenario:path, sqlite: $sqlite:ident, mariadb: $mariadb:ident, postgres: $postgres:ident $(,)?) => {
        #[actix_rt::test(system = "crate::common::TestSystem")]
        async fn $sqlite() {
            $scenario($crate::common::TestStore::sqlite()).await;
        }

        $crate::common::on_each_backend!($scenario, mariadb: $mariadb, postgres: $postgres);
    };
}

pub(crate) use on_each_backend;

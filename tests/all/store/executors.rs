//! `crates/ax-store/src/queries/executors.rs`: a registered member stays with the token that registered
//! it, a defined one with the admins, and a group takes a capped number of registered members.

use ax_core::ids::GroupName;
use ax_store::queries::executors::{
    self, GroupSettings, Holder, Joining, MemberCap, Registered, Registrant, Unregistered,
};
use ax_store::rows::schema::ax_executor_member::dsl as m;
use ax_store::Db;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use crate::store::support::{base, conn, on_every_backend, secs};

on_every_backend!(
    members_stay_with_their_token,
    registrations_are_capped_per_group
);

const DEFAULTS: GroupSettings<'static> = GroupSettings {
    routing: "ROUND_ROBIN",
    max_in_flight: 64,
};

fn token(name: &str) -> Registrant<'_> {
    Registrant {
        token: name,
        acts_on_any: false,
    }
}

const ADMIN: Registrant<'static> = Registrant {
    token: "admin",
    acts_on_any: true,
};

/// Registers `url` into `group` with `by`, at most `max` live registered members.
async fn join(db: &Db, group: &str, url: &str, by: Registrant<'_>, max: usize) -> Registered {
    let group = GroupName::from(group);
    let joining = Joining {
        group: &group,
        url,
        capacity: None,
        by,
    };
    let cap = MemberCap {
        max,
        live_since: base() - secs(30),
    };
    executors::register(&mut conn(db).await, joining, DEFAULTS, cap, base())
        .await
        .expect("register")
}

async fn leave(db: &Db, group: &str, url: &str, by: Registrant<'_>) -> Unregistered {
    executors::unregister(&mut conn(db).await, &group.into(), url, by, base())
        .await
        .expect("unregister")
}

async fn define(db: &Db, group: &str, members: &[&str]) {
    let members: Vec<String> = members.iter().map(|m| m.to_string()).collect();
    executors::put_group(
        &mut conn(db).await,
        &group.into(),
        DEFAULTS,
        &members,
        base(),
    )
    .await
    .expect("put_group");
}

async fn members_stay_with_their_token(db: &Db) {
    let (a, b) = ("http://10.0.0.1/", "http://10.0.0.2/");
    let joined = Registered::Joined {
        group_created: true,
    };
    assert_eq!(join(db, "billing", a, token("alpha"), 10).await, joined);
    assert_eq!(
        join(db, "billing", a, token("alpha"), 10).await,
        Registered::Renewed
    );
    // Another token neither renews nor removes it; an admin does both, and leaves it alpha's.
    assert_eq!(
        join(db, "billing", a, token("beta"), 10).await,
        Registered::Held
    );
    let held = Unregistered::Held(Holder::OtherToken);
    assert_eq!(leave(db, "billing", a, token("beta")).await, held);
    assert_eq!(join(db, "billing", a, ADMIN, 10).await, Registered::Renewed);
    assert_eq!(
        join(db, "billing", a, token("beta"), 10).await,
        Registered::Held
    );
    assert_eq!(
        leave(db, "billing", a, token("alpha")).await,
        Unregistered::Removed
    );
    assert_eq!(
        leave(db, "billing", a, token("alpha")).await,
        Unregistered::NotFound
    );

    // A defined member: a token may give its capacity, only an admin removes it; a member
    // that registered itself and is then defined is the admins' from then on.
    assert_eq!(
        join(db, "billing", b, token("beta"), 10).await,
        Registered::Joined {
            group_created: false
        }
    );
    define(db, "billing", &[a, b]).await;
    assert_eq!(
        join(db, "billing", a, token("alpha"), 10).await,
        Registered::Renewed
    );
    let defined = Unregistered::Held(Holder::Admin);
    assert_eq!(leave(db, "billing", a, token("alpha")).await, defined);
    assert_eq!(leave(db, "billing", b, token("beta")).await, defined);
    assert_eq!(leave(db, "billing", b, ADMIN).await, Unregistered::Removed);
    assert_eq!(leave(db, "billing", a, ADMIN).await, Unregistered::Removed);

    // A member registered before ax recorded tokens: the first token to renew it takes it.
    assert!(matches!(
        join(db, "billing", a, token("alpha"), 10).await,
        Registered::Joined { .. }
    ));
    let mut c = conn(db).await;
    let forgotten = ax_store::with_conn!(&mut c, |c| diesel::update(m::ax_executor_member)
        .set(m::registered_by.eq(None::<String>))
        .execute(c)
        .await)
    .expect("forget the tokens");
    assert_eq!(forgotten, 1);
    drop(c);
    assert_eq!(leave(db, "billing", a, token("beta")).await, held);
    assert_eq!(
        join(db, "billing", a, token("beta"), 10).await,
        Registered::Renewed
    );
    assert_eq!(
        join(db, "billing", a, token("alpha"), 10).await,
        Registered::Held
    );
    assert_eq!(
        leave(db, "billing", a, token("beta")).await,
        Unregistered::Removed
    );
}

async fn registrations_are_capped_per_group(db: &Db) {
    let url = |n: usize| format!("http://10.0.1.{n}/");
    define(db, "payroll", &["http://10.0.2.1/", "http://10.0.2.2/"]).await;
    for n in 1..=2 {
        let joined = join(db, "payroll", &url(n), token("alpha"), 2).await;
        assert_eq!(
            joined,
            Registered::Joined {
                group_created: false
            },
            "{n}"
        );
    }
    // Defined members do not count; registered ones do, whichever token registered them.
    assert_eq!(
        join(db, "payroll", &url(3), token("beta"), 2).await,
        Registered::Full { max: 2 }
    );
    assert_eq!(
        join(db, "payroll", &url(3), ADMIN, 2).await,
        Registered::Full { max: 2 }
    );
    // A heartbeat of a member in is no new member; another group has a cap of its own.
    assert_eq!(
        join(db, "payroll", &url(2), token("alpha"), 2).await,
        Registered::Renewed
    );
    assert!(matches!(
        join(db, "reports", &url(3), token("beta"), 2).await,
        Registered::Joined { .. }
    ));
    // One leaves: another joins.
    assert_eq!(
        leave(db, "payroll", &url(1), token("alpha")).await,
        Unregistered::Removed
    );
    assert!(matches!(
        join(db, "payroll", &url(3), token("beta"), 2).await,
        Registered::Joined { .. }
    ));
    // Members not heard from within the TTL do not count, dropped or not yet.
    let later = MemberCap {
        max: 2,
        live_since: base() + secs(1),
    };
    let joining = Joining {
        group: &"payroll".into(),
        url: &url(4),
        capacity: None,
        by: token("beta"),
    };
    let joined = executors::register(&mut conn(db).await, joining, DEFAULTS, later, base())
        .await
        .expect("register");
    assert_eq!(
        joined,
        Registered::Joined {
            group_created: false
        }
    );
}

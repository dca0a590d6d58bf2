//! The registry contract's run slots (`MaxRunsPerAccount`).

use super::NOW;
use crate::registry::{Slots, Taken};

const KEY: &str = "slots#111122223333/eu-west-1";
const MINUTE: i64 = 60_000;

pub(super) async fn slots<R: Slots>(r: &R, label: &str) {
    let take = |holder: &'static str, expires: i64, now: i64| async move {
        r.take_slot(KEY, holder, 2, expires, now)
            .await
            .unwrap_or_else(|e| panic!("{label}: take {holder}: {e}"))
    };
    assert_eq!(
        take("a", NOW + MINUTE, NOW).await,
        Taken::Yes,
        "{label}: first"
    );
    assert_eq!(
        take("b", NOW + 10 * MINUTE, NOW).await,
        Taken::Yes,
        "{label}"
    );
    assert_eq!(
        take("c", NOW + MINUTE, NOW).await,
        Taken::Full { holders: 2 },
        "{label}: the cap holds"
    );
    assert_eq!(
        take("a", NOW + 2 * MINUTE, NOW).await,
        Taken::Yes,
        "{label}: a holder takes its own again (a retried step)"
    );
    r.release_slot(KEY, "a").await.expect("released");
    r.release_slot(KEY, "a")
        .await
        .expect("released twice: nothing happens");
    r.release_slot("slots#none/none", "a")
        .await
        .expect("no item: nothing happens");
    assert_eq!(
        take("c", NOW + MINUTE, NOW).await,
        Taken::Yes,
        "{label}: a freed slot"
    );
    // `c`'s slot ran out (its run died): the next take clears it.
    let later = NOW + 5 * MINUTE;
    assert_eq!(
        take("d", later + MINUTE, later).await,
        Taken::Yes,
        "{label}: run out"
    );
    let holders = r.slot_holders(KEY).await.expect("read");
    let mut names: Vec<&str> = holders.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["b", "d"], "{label}");
    assert_eq!(holders["d"], later + MINUTE, "{label}");
    for holder in ["b", "d"] {
        r.release_slot(KEY, holder).await.expect("released");
    }
    assert!(
        r.slot_holders(KEY).await.expect("read").is_empty(),
        "{label}"
    );
}

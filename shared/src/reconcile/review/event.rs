//! The preview function's input: a `Pull Request Changed` event the
//! webhook put on the bus, as EventBridge delivers it to a rule's target.

use serde_json::Value;

use crate::pull_request::PullRequest;

/// The pull request of an EventBridge event for `installation`; an error
/// that says what is wrong with any other (nothing is previewed).
pub fn pull_request_event(event: &Value, installation: &str) -> Result<PullRequest, String> {
    let kind = event.get("detail-type").and_then(Value::as_str);
    if kind != Some("Pull Request Changed") {
        return Err(format!(
            "not a Pull Request Changed event: detail-type {}",
            kind.map_or("missing".to_owned(), |k| format!("{k:?}"))
        ));
    }
    let detail = event
        .get("detail")
        .ok_or_else(|| "the event has no detail".to_owned())?;
    let theirs = detail.get("installation").and_then(Value::as_str);
    if theirs != Some(installation) {
        return Err(format!(
            "the event is for the installation {theirs:?}, not {installation:?}"
        ));
    }
    let pr = detail
        .get("pullRequest")
        .ok_or_else(|| "the event's detail has no pullRequest".to_owned())?;
    serde_json::from_value(pr.clone()).map_err(|e| format!("the event's detail.pullRequest: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notice::{Notice, NoticeKind};
    use crate::pull_request::{Host, PrState};

    #[test]
    fn the_webhooks_notice_reads_back_as_its_pull_request() {
        let pr = PullRequest {
            host: Host::GitLab,
            repository: "g/p".into(),
            repository_urls: vec!["https://gitlab.example/g/p.git".into()],
            number: 3,
            base_ref: "refs/heads/main".into(),
            head_ref: "refs/heads/f".into(),
            head_commit: "a".repeat(40),
            fork: false,
            state: PrState::Open,
            merge_commit: None,
            url: None,
        };
        let notice = Notice {
            kind: Some(NoticeKind::PullRequestChanged),
            installation: "prod".into(),
            pull_request: Some(pr.clone()),
            ..Notice::default()
        };
        let event = serde_json::json!({
            "detail-type": notice.detail_type(),
            "source": "stacksync",
            "detail": serde_json::to_value(&notice).unwrap(),
        });
        assert_eq!(pull_request_event(&event, "prod").unwrap(), pr);
        let e = pull_request_event(&event, "other").unwrap_err();
        assert!(e.contains("\"prod\""), "{e}");
        let mut broken = event.clone();
        broken["detail"]["pullRequest"]["number"] = "x".into();
        assert!(
            pull_request_event(&broken, "prod")
                .unwrap_err()
                .contains("detail.pullRequest")
        );
        let e = pull_request_event(
            &serde_json::json!({"detail-type": "Reconcile Started"}),
            "prod",
        );
        assert!(e.unwrap_err().contains("Reconcile Started"));
    }
}

use super::*;
use serde_json::json;

fn deadline() -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH
}

fn outcome_of(status: u16, body: &[u8], deadline: DateTime<Utc>) -> Outcome {
    classify_reply(status, body, deadline).outcome
}

#[test]
fn a_reply_may_carry_an_output_kept_to_its_end() {
    let long = format!("{}end", "x".repeat(ax_core::run::logs::MAX_OUTPUT_BYTES));
    let said = classify_reply(
        200,
        &reply(json!({"status": "SUCCESS", "output": long})),
        deadline(),
    );
    let output = said.output.unwrap();
    assert_eq!(output.len(), ax_core::run::logs::MAX_OUTPUT_BYTES);
    assert!(output.ends_with("end"));
    assert_eq!(classify_reply(200, b"{}", deadline()).output, None);
}

fn reply(body: serde_json::Value) -> Vec<u8> {
    body.to_string().into_bytes()
}

#[test]
fn a_2xx_with_a_status_is_the_result() {
    assert_eq!(
        outcome_of(
            200,
            &reply(json!({"status": ReportedStatus::Success, "code": 0, "message": "ok"})),
            deadline()
        ),
        Outcome::Succeeded {
            code: Some("0".into()),
            message: Some("ok".into()),
        }
    );
    assert_eq!(
        outcome_of(
            200,
            &reply(json!({"status": ReportedStatus::Failed, "code": "E42", "retry": false})),
            deadline()
        ),
        Outcome::Failed {
            code: Some("E42".into()),
            message: None,
            retry: false,
        }
    );
    // The protocol's word for it.
    let stop = reply(json!({"status": ReportedStatus::Failed, "stopRetry": true}));
    assert!(matches!(
        outcome_of(200, &stop, deadline()),
        Outcome::Failed { retry: false, .. }
    ));
    let go_on = reply(json!({"status": ReportedStatus::Failed, "stopRetry": false}));
    assert!(matches!(
        outcome_of(200, &go_on, deadline()),
        Outcome::Failed { retry: true, .. }
    ));
}

#[test]
fn without_a_result_202_means_a_callback_follows_and_other_2xx_success() {
    let accepted = Outcome::Accepted {
        deadline: deadline(),
    };
    assert_eq!(outcome_of(202, b"", deadline()), accepted);
    assert_eq!(
        outcome_of(202, br#"{"status":"DONE"}"#, deadline()),
        accepted
    );
    let succeeded = Outcome::Succeeded {
        code: None,
        message: None,
    };
    for (status, body) in [
        (200, &b""[..]),
        (200, b"ok"),
        (201, br#"{"id":7}"#),
        (200, br#"{"status":"DONE"}"#),
        (204, b""),
    ] {
        assert_eq!(outcome_of(status, body, deadline()), succeeded, "{status}");
    }
}

#[test]
fn a_result_in_the_body_wins_over_the_code() {
    assert_eq!(
        outcome_of(
            202,
            &reply(json!({"status": ReportedStatus::Success, "code": "OK"})),
            deadline()
        ),
        Outcome::Succeeded {
            code: Some("OK".into()),
            message: None,
        }
    );
    assert!(matches!(
        outcome_of(
            201,
            &reply(json!({"status": ReportedStatus::Failed})),
            deadline()
        ),
        Outcome::Failed { retry: true, .. }
    ));
}

#[test]
fn non_2xx_is_a_failed_attempt_with_the_reason() {
    assert_eq!(
        outcome_of(503, b" busy \n", deadline()),
        Outcome::Failed {
            code: Some("HTTP_503".into()),
            message: Some("busy".into()),
            retry: true,
        }
    );
}

#[test]
fn a_reply_code_or_message_a_callback_would_refuse_is_dropped_not_the_result() {
    let result = |body: serde_json::Value| outcome_of(200, &reply(body), deadline());
    assert_eq!(
        result(json!({"status": ReportedStatus::Success, "code": "E\u{0}1", "message": ["m"]})),
        Outcome::Succeeded {
            code: None,
            message: None,
        }
    );
    for code in [json!(1.5), json!(true), json!({"a": 1}), json!([200])] {
        assert_eq!(
            result(
                json!({"status": ReportedStatus::Failed, "code": code, "message": "a\r\n\tb\u{1b}[2J"})
            ),
            Outcome::Failed {
                code: None,
                message: Some("a\n\tb[2J".into()),
                retry: true,
            },
            "{code}"
        );
    }
    assert_eq!(
        result(json!({"status": ReportedStatus::Success, "code": 200})),
        Outcome::Succeeded {
            code: Some("200".into()),
            message: None,
        }
    );
    assert_eq!(
        outcome_of(500, b"boom\x00\x1b[31m\nat line 2", deadline()),
        Outcome::Failed {
            code: Some("HTTP_500".into()),
            message: Some("boom[31m\nat line 2".into()),
            retry: true,
        }
    );
}

#[test]
fn long_messages_are_cut_on_a_char_boundary() {
    let long = "é".repeat(MAX_MESSAGE_CHARS + 10);
    assert_eq!(
        cut(long, MAX_MESSAGE_CHARS).chars().count(),
        MAX_MESSAGE_CHARS
    );
}

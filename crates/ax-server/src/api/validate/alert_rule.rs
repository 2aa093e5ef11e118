//! Alert rules as bodies give them: a task's `alerts` field and a scene's rule.

use serde_json::Value;

use crate::error::ApiError;
use ax_core::alerting::AlertRule;

/// A rule, its keys checked; an error names the key under `prefix` (`alerts.threshold` for a
/// task's field, `threshold` for a scene's body). Channel names are checked by the service,
/// which knows the configured ones.
pub fn alert_rule(value: Value, prefix: &str) -> Result<AlertRule, ApiError> {
    let whole = match prefix.trim_end_matches('.') {
        "" => "alerts",
        field => field,
    };
    if !value.is_object() {
        let message = format!(
            "{whole} must be an object {{events, channels, threshold, windowSecs, silenceSecs}}"
        );
        return Err(ApiError::invalid(whole, message));
    }
    let rule: AlertRule = serde_json::from_value(value)
        .map_err(|err| ApiError::invalid(whole, format!("{whole}: {err}")))?;
    rule.check_values().map_err(|err| {
        let field = format!("{prefix}{}", err.field);
        ApiError::invalid(&field, format!("{field} {}", err.message))
    })?;
    Ok(rule)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn field(value: Value, prefix: &str) -> Option<String> {
        alert_rule(value, prefix)
            .err()
            .and_then(|err| err.field().map(str::to_string))
    }

    #[test]
    fn a_bad_rule_names_its_key_under_the_prefix() {
        assert_eq!(
            field(json!({"threshold": 0}), "alerts."),
            Some("alerts.threshold".into())
        );
        assert_eq!(
            field(json!({"windowSecs": 0}), ""),
            Some("windowSecs".into())
        );
        assert_eq!(
            field(json!({"treshold": 2}), "alerts."),
            Some("alerts".into())
        );
        assert_eq!(field(json!([1]), ""), Some("alerts".into()));
        let rule = alert_rule(json!({"events": ["LAG"], "threshold": 2}), "alerts.");
        assert_eq!(rule.map(|rule| rule.threshold).ok(), Some(2));
    }
}

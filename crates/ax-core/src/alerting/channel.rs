//! Alert channels as configured (`alerts.channels`): a name and a kind with its own keys,
//! checked once at start-up; secrets may be written as `${VAR}` and are read from the
//! environment when the channel is used, never kept in the file.

use serde::Deserialize;

crate::text_enum! {
    /// How a channel is told.
    ChannelKind { Webhook => "webhook", Slack => "slack", Email => "email" }
}

/// One configured channel.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Channel {
    pub name: String,
    pub kind: ChannelKind,
    /// `webhook` and `slack`: where to POST.
    #[serde(default)]
    pub url: Option<String>,
    /// `webhook`: a minijinja body template over the alert's fields (else the alert as JSON).
    #[serde(default)]
    pub template: Option<String>,
    /// `email`: `smtp://user:password@host:port` (STARTTLS), and the addresses.
    #[serde(default)]
    pub smtp: Option<String>,
    #[serde(default)]
    pub to: Vec<String>,
    #[serde(default)]
    pub from: Option<String>,
    /// `email`: a PEM file of the CA that signs the mail server's certificate, for a relay
    /// with a private CA (else the public roots).
    #[serde(default)]
    pub ca_file: Option<String>,
}

/// A channel that cannot be used: the key (`alerts.channels[1].url`), and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ChannelError {
    pub key: String,
    pub message: String,
}

/// Checks the channels: names `[a-z0-9_.-]{1,64}` given once, each kind with its keys.
pub fn check_channels(channels: &[Channel]) -> Result<(), ChannelError> {
    for (n, channel) in channels.iter().enumerate() {
        let refuse = |key: &str, message: String| {
            Err(ChannelError {
                key: format!("alerts.channels[{n}].{key}"),
                message,
            })
        };
        if !crate::dispatch::routing::valid_group_name(&channel.name) {
            return refuse("name", "must be 1-64 of a-z 0-9 _ . -".into());
        }
        if channels[..n].iter().any(|c| c.name == channel.name) {
            return refuse("name", format!("`{}` is given twice", channel.name));
        }
        match channel.kind {
            ChannelKind::Webhook | ChannelKind::Slack => {
                let Some(url) = &channel.url else {
                    return refuse("url", format!("a {} channel needs one", channel.kind));
                };
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return refuse("url", "must be an http:// or https:// URL".into());
                }
                if channel.smtp.is_some() || !channel.to.is_empty() {
                    return refuse(
                        "smtp",
                        format!("is for email channels, not {}", channel.kind),
                    );
                }
            }
            ChannelKind::Email => {
                let Some(smtp) = &channel.smtp else {
                    return refuse(
                        "smtp",
                        "an email channel needs smtp://user:password@host:port".into(),
                    );
                };
                if !smtp.starts_with("smtp://") {
                    return refuse("smtp", "must be smtp://user:password@host:port".into());
                }
                if channel.to.is_empty() {
                    return refuse("to", "an email channel needs at least one address".into());
                }
                if let Some(bad) = channel.to.iter().find(|a| !is_address(a)) {
                    return refuse("to", format!("`{bad}` is not an email address"));
                }
                if channel.url.is_some() || channel.template.is_some() {
                    return refuse("url", "is for webhook and slack channels".into());
                }
                if channel
                    .ca_file
                    .as_deref()
                    .is_some_and(|f| !std::path::Path::new(f).is_file())
                {
                    return refuse("ca_file", "is not a readable file".into());
                }
            }
        }
    }
    Ok(())
}

/// `local@domain`, plainly: one `@`, something on each side, no blanks or brackets.
fn is_address(address: &str) -> bool {
    match address.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && domain.contains('.')
                && !domain.contains('@')
                && !address.contains(|c: char| c.is_whitespace() || "<>,;\"".contains(c))
        }
        None => false,
    }
}

/// `text` with each `${VAR}` replaced by `lookup(VAR)`; `Err(VAR)` for one not set.
pub fn expand(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        out.push_str(&lookup(name).ok_or_else(|| name.to_string())?);
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channels(yaml: &str) -> Vec<Channel> {
        crate::text::yaml::from_str(yaml).expect("channels")
    }

    #[test]
    fn the_issues_example_reads_and_checks() {
        let read = channels(
            "- {name: ops-hook, kind: webhook, url: \"https://hooks.example/ax\"}\n\
             - {name: team-mail, kind: email, smtp: \"smtp://user:${SMTP_PASSWORD}@mail:587\", to: [ops@example.com]}\n\
             - {name: chat, kind: slack, url: \"https://hooks.slack.example/T/B/X\"}\n",
        );
        assert_eq!(read[1].kind, ChannelKind::Email);
        assert_eq!(check_channels(&read), Ok(()));
    }

    #[test]
    fn a_bad_channel_names_its_key() {
        let key = |yaml: &str| check_channels(&channels(yaml)).map_err(|e| e.key);
        assert_eq!(
            key("- {name: Bad Name, kind: slack, url: 'http://a/'}"),
            Err("alerts.channels[0].name".into())
        );
        assert_eq!(
            key("- {name: a, kind: slack, url: 'http://a/'}\n- {name: a, kind: slack, url: 'http://b/'}"),
            Err("alerts.channels[1].name".into())
        );
        assert_eq!(
            key("- {name: a, kind: webhook}"),
            Err("alerts.channels[0].url".into())
        );
        assert_eq!(
            key("- {name: a, kind: webhook, url: 'ftp://a/'}"),
            Err("alerts.channels[0].url".into())
        );
        assert_eq!(
            key("- {name: m, kind: email, to: [a@b.c]}"),
            Err("alerts.channels[0].smtp".into())
        );
        assert_eq!(
            key("- {name: m, kind: email, smtp: 'smtp://h:25'}"),
            Err("alerts.channels[0].to".into())
        );
        assert_eq!(
            key("- {name: m, kind: email, smtp: 'smtp://h:25', to: ['not an address']}"),
            Err("alerts.channels[0].to".into())
        );
        assert!(crate::text::yaml::from_str::<Vec<Channel>>("- {name: a, kind: pager}").is_err());
        assert!(
            crate::text::yaml::from_str::<Vec<Channel>>("- {name: a, kind: slack, urll: x}")
                .is_err()
        );
    }

    #[test]
    fn secrets_come_from_the_environment_when_used() {
        let env = |name: &str| (name == "SMTP_PASSWORD").then(|| "s3cret".to_string());
        assert_eq!(
            expand("smtp://user:${SMTP_PASSWORD}@mail:587", env),
            Ok("smtp://user:s3cret@mail:587".to_string())
        );
        assert_eq!(
            expand("no ${MISSING} here", env),
            Err("MISSING".to_string())
        );
        assert_eq!(
            expand("plain ${unclosed", env),
            Ok("plain ${unclosed".to_string())
        );
    }
}

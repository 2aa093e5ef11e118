//! Handler URLs: in the form the HTTP client sends them, their hosts on the allowlist.

use crate::error::ApiError;
use ax_core::security::Allowlist;
use ax_core::task::fields;

/// The column's limit (VARCHAR counts characters; SQLite has no limit).
pub const MAX_URL_CHARS: usize = fields::HANDLER_URL.max();

/// A handler URL in the form the HTTP client sends it, its host on the allowlist.
pub(super) fn handler_url(raw: String, allowlist: &Allowlist) -> Result<String, ApiError> {
    callable_url(raw, allowlist, "handlerUrl", MAX_URL_CHARS)
}

/// A URL ax calls (a handler's, an executor member's) in the form the HTTP client sends it,
/// at most `max` characters, its host on the allowlist; a refusal names `field`.
pub(super) fn callable_url(
    raw: String,
    allowlist: &Allowlist,
    field: &str,
    max: usize,
) -> Result<String, ApiError> {
    let invalid = |why: String| ApiError::invalid(field, format!("{field} {why}"));
    let url = normalised_url(&raw, max).map_err(invalid)?;
    // The normalised host: an IDN is matched as the punycode name the client resolves.
    let host = url.host_str().unwrap_or_default();
    if !allowlist.allows(host) {
        return Err(invalid(format!(
            "host `{host}` is not in security.handler_allowlist"
        )));
    }
    Ok(url.into())
}

/// Parses a handler URL into `url::Url`'s serialisation (non-ASCII percent-encoded, IDN host as
/// punycode, default port dropped), which is what gets stored and called; says why when the
/// text is ambiguous or the HTTP client could not send it.
fn normalised_url(raw: &str, max: usize) -> Result<url::Url, String> {
    if raw.chars().count() > max {
        return Err(format!("is longer than {max} characters"));
    }
    unambiguous(raw)?;
    let url = url::Url::parse(raw).map_err(|err| format!("is not a URL: {err}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must be an http or https URL".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    if url.fragment().is_some() {
        return Err("must not have a #fragment: it is never sent to the handler".into());
    }
    // Percent-encoding can make the stored form longer than the text as written.
    if url.as_str().len() > max {
        return Err(format!(
            "is longer than {max} characters once percent-encoded"
        ));
    }
    awc::http::Uri::try_from(url.as_str())
        .map_err(|err| format!("cannot be sent by the HTTP client ({err}): {url}"))?;
    Ok(url)
}

/// Refuses text the URL parser would silently repair into something the author may not have
/// meant: whitespace and control characters (stripped or removed), backslashes (read as `/`),
/// no `//` or an empty authority (the host taken from elsewhere), and userinfo.
fn unambiguous(raw: &str) -> Result<(), String> {
    if let Some(c) = raw.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "contains whitespace or a control character ({c:?}); percent-encode it"
        ));
    }
    if raw.contains('\\') {
        return Err("contains a backslash; write / or percent-encode it".into());
    }
    let rest = raw.split_once(':').map_or("", |(_, rest)| rest);
    let Some(rest) = rest.strip_prefix("//") else {
        return Err("must start with http:// or https://".into());
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err("must not carry user:password@ (userinfo)".into());
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Err("must name a host".into());
    }
    Ok(())
}

//! A task's version on the wire: its `ETag` (`"3"`, a strong tag) and the `If-Match` condition
//! of a change (RFC 9110 §13.1.1). Pure: the handlers read the header, the store compares the
//! versions in its UPDATE.

use ax_store::queries::tasks::Versions;

/// The `ETag` of a task at `version`.
pub fn etag(version: i64) -> String {
    format!("\"{version}\"")
}

/// Why an `If-Match` header cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("If-Match must be * or a list of entity tags such as \"3\" (the task's ETag): {0}")]
pub struct BadIfMatch(String);

/// The versions the `If-Match` header values allow: any (no header, or `*`), or those named by
/// strong tags. The comparison is strong, so a weak tag (`W/"3"`) or one that is not a version
/// of ours names none, and the change fails its precondition.
pub fn if_match(values: &[&str]) -> Result<Versions, BadIfMatch> {
    if values.is_empty() {
        return Ok(Versions::Any);
    }
    let mut versions = Vec::new();
    for value in values {
        let value = value.trim();
        if value == "*" {
            return Ok(Versions::Any);
        }
        let mut rest = value;
        let mut tags = 0;
        loop {
            rest = rest.trim_start_matches([' ', '\t', ',']);
            if rest.is_empty() {
                break;
            }
            let (weak, tagged) = match rest.strip_prefix("W/") {
                Some(tagged) => (true, tagged),
                None => (false, rest),
            };
            let quoted = tagged.strip_prefix('"').and_then(|q| q.split_once('"'));
            let Some((tag, after)) = quoted else {
                return Err(BadIfMatch(format!("`{value}` is not a quoted entity tag")));
            };
            if !after.is_empty() && !after.starts_with([' ', '\t', ',']) {
                return Err(BadIfMatch(format!("`{value}`: a tag ends at its quote")));
            }
            if let (false, Ok(version)) = (weak, tag.parse::<i64>()) {
                versions.push(version);
            }
            tags += 1;
            rest = after;
        }
        if tags == 0 {
            return Err(BadIfMatch("the header is empty".into()));
        }
    }
    Ok(Versions::OneOf(versions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strong_tags_name_versions_and_star_any() {
        assert_eq!(etag(3), "\"3\"");
        assert_eq!(if_match(&[]), Ok(Versions::Any));
        assert_eq!(if_match(&["*"]), Ok(Versions::Any));
        assert_eq!(if_match(&["\"3\""]), Ok(Versions::OneOf(vec![3])));
        assert_eq!(
            if_match(&[" \"3\" , \"5\"", "\"8\""]),
            Ok(Versions::OneOf(vec![3, 5, 8]))
        );
        assert!(if_match(&["\"3\", \"4\""]).is_ok_and(|v| v.allows(4) && !v.allows(5)));
    }

    #[test]
    fn weak_and_foreign_tags_match_nothing() {
        // Strong comparison: a weak tag never matches, nor does a tag ax never sent.
        assert_eq!(if_match(&["W/\"3\""]), Ok(Versions::OneOf(vec![])));
        assert_eq!(if_match(&["\"abc\", \"a,b\""]), Ok(Versions::OneOf(vec![])));
        assert!(!Versions::OneOf(vec![]).allows(3));
    }

    #[test]
    fn unquoted_or_empty_tags_are_refused() {
        for bad in ["3", "\"3", "\"3\"x", "", " , ", "W/3"] {
            assert!(if_match(&[bad]).is_err(), "{bad:?}");
        }
    }
}

//! Percent-decoding of URI path segments and query strings.

use std::borrow::Cow;

/// Decode `%XX` escapes in `s` (and `+` as a space when `plus_is_space`, as
/// in `application/x-www-form-urlencoded` queries). A `%` not followed by two
/// hex digits is kept as is; bytes that are not UTF-8 after decoding become
/// U+FFFD. Borrows when there is nothing to decode.
pub(crate) fn percent_decode(s: &str, plus_is_space: bool) -> Cow<'_, str> {
    if !(s.contains('%') || plus_is_space && s.contains('+')) {
        return Cow::Borrowed(s);
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => match (hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    match String::from_utf8(out) {
        Ok(s) => Cow::Owned(s),
        Err(e) => Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

fn hex(b: Option<&u8>) -> Option<u8> {
    (*b? as char).to_digit(16).map(|d| d as u8)
}

/// The `name=value` pairs of a query string, decoded; a pair without `=` has
/// an empty value, empty pairs (`a=1&&b=2`) are skipped.
pub(crate) fn query_pairs(query: &str) -> impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)> {
    query.split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(name, true), percent_decode(value, true))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes_and_plus() {
        assert_eq!(percent_decode("a%20b%2Fc", false), "a b/c");
        assert_eq!(percent_decode("a+b", true), "a b");
        assert_eq!(percent_decode("a+b", false), "a+b");
        assert!(matches!(percent_decode("plain", true), Cow::Borrowed(_)));
    }

    #[test]
    fn keeps_bad_escapes_and_replaces_bad_utf8() {
        assert_eq!(percent_decode("100%", false), "100%");
        assert_eq!(percent_decode("%zz%4", false), "%zz%4");
        assert_eq!(percent_decode("%C3%A9", false), "é");
        assert_eq!(percent_decode("%FF", false), "\u{FFFD}");
    }

    #[test]
    fn splits_query_pairs() {
        let pairs: Vec<_> = query_pairs("a=1&&b&c=x%3Dy&a=2")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let expect = [("a", "1"), ("b", ""), ("c", "x=y"), ("a", "2")];
        assert_eq!(pairs, expect.map(|(k, v)| (k.to_owned(), v.to_owned())));
    }
}

//! The static table (RFC 7541 §2.3.1, Appendix A) and the index address space it shares
//! with the dynamic table (§2.3.3).

use crate::field_coding::dynamic_table::DynamicTable;

/// RFC 7541 Appendix A; HPACK index i is entry i-1.
pub(crate) const STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The first dynamic table index; lower ones are static (§2.3.3).
pub(crate) const FIRST_DYNAMIC: usize = STATIC_TABLE.len() + 1;

/// The static index of `(name, value)` and whether the value matched too; a full match wins
/// over a name match.
pub(crate) fn static_find(name: &[u8], value: &[u8]) -> Option<(usize, bool)> {
    let mut by_name = None;
    for (i, &(n, v)) in STATIC_TABLE.iter().enumerate() {
        if n == name {
            if v == value {
                return Some((i + 1, true));
            }
            by_name.get_or_insert(i + 1);
        }
    }
    by_name.map(|i| (i, false))
}

/// The field at HPACK `index`: 1..=61 static, then the dynamic table newest first (§2.3.3).
pub(crate) fn field(dynamic: &DynamicTable, index: usize) -> Option<(&[u8], &[u8])> {
    match index.checked_sub(FIRST_DYNAMIC) {
        Some(i) => dynamic.get(i),
        None => STATIC_TABLE.get(index.checked_sub(1)?).copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_table_is_appendix_a() {
        assert_eq!(STATIC_TABLE.len(), 61);
        let t = DynamicTable::new(0);
        assert_eq!(field(&t, 1), Some((&b":authority"[..], &b""[..])));
        assert_eq!(field(&t, 2), Some((&b":method"[..], &b"GET"[..])));
        assert_eq!(field(&t, 8), Some((&b":status"[..], &b"200"[..])));
        assert_eq!(field(&t, 14), Some((&b":status"[..], &b"500"[..])));
        assert_eq!(
            field(&t, 16),
            Some((&b"accept-encoding"[..], &b"gzip, deflate"[..]))
        );
        assert_eq!(field(&t, 24), Some((&b"cache-control"[..], &b""[..])));
        assert_eq!(field(&t, 33), Some((&b"date"[..], &b""[..])));
        assert_eq!(field(&t, 55), Some((&b"set-cookie"[..], &b""[..])));
        assert_eq!(field(&t, 61), Some((&b"www-authenticate"[..], &b""[..])));
        assert_eq!(field(&t, 0), None);
        assert_eq!(field(&t, 62), None);
        // Only entries 2..=14 and 16 have values.
        for (i, (_, v)) in STATIC_TABLE.iter().enumerate() {
            assert_eq!(
                v.is_empty(),
                !(1..=13).contains(&i) && i != 15,
                "index {}",
                i + 1
            );
        }
    }

    #[test]
    fn static_find_prefers_a_full_match() {
        assert_eq!(static_find(b":status", b"200"), Some((8, true)));
        assert_eq!(static_find(b":status", b"404"), Some((13, true)));
        assert_eq!(static_find(b":status", b"201"), Some((8, false)));
        assert_eq!(
            static_find(b"content-type", b"text/plain"),
            Some((31, false))
        );
        assert_eq!(static_find(b"x-custom", b""), None);
        assert_eq!(static_find(b":path", b"/index.html"), Some((5, true)));
    }

    #[test]
    fn dynamic_entries_follow_the_static_ones() {
        let mut t = DynamicTable::new(4096);
        t.insert(b"custom-key", b"custom-header");
        assert_eq!(
            field(&t, 62),
            Some((&b"custom-key"[..], &b"custom-header"[..]))
        );
        assert_eq!(field(&t, 63), None);
    }
}

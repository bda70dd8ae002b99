//! The decoder's dynamic table (RFC 9204 §3.2): the FIFO HPACK keeps too, addressed by
//! absolute index (§3.2.4) instead of HPACK's newest-first position.

use super::Malformed;
use crate::field_coding::dynamic_table::{self as fifo, entry_size};

/// A dynamic table and the number of insertions it has seen.
pub(super) struct DynamicTable {
    entries: fifo::DynamicTable,
    /// Every insertion and duplication so far; the next entry's absolute index.
    insert_count: u64,
}

impl DynamicTable {
    /// An empty table of capacity 0 (§3.2.3).
    pub(super) fn new() -> Self {
        DynamicTable {
            entries: fifo::DynamicTable::new(0),
            insert_count: 0,
        }
    }

    /// The Insert Count (§3.2.4): entries ever added.
    pub(super) fn insert_count(&self) -> u64 {
        self.insert_count
    }

    /// Sets the capacity, evicting the oldest entries until the table fits (§3.2.3).
    pub(super) fn set_capacity(&mut self, capacity: usize) {
        self.entries.set_max_size(capacity);
    }

    /// The entry with absolute index `absolute`, unless not yet inserted or evicted.
    pub(super) fn get(&self, absolute: u64) -> Option<(&[u8], &[u8])> {
        let newest_first = self.insert_count.checked_sub(absolute.checked_add(1)?)?;
        self.entries.get(usize::try_from(newest_first).ok()?)
    }

    /// The entry an encoder instruction's relative index names: 0 is the newest (§3.2.5).
    pub(super) fn relative(&self, index: usize) -> Option<(&[u8], &[u8])> {
        self.entries.get(index)
    }

    /// Adds an entry, evicting the oldest ones to make room; one larger than the capacity
    /// is an error (§3.2.2). The slices must not point into this table.
    pub(super) fn insert(&mut self, name: &[u8], value: &[u8]) -> Result<(), Malformed> {
        if entry_size(name, value) > self.entries.max_size() {
            return Err(Malformed::Insert);
        }
        self.entries.insert(name, value);
        self.insert_count += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_and_relative_indexing_after_eviction() {
        let mut t = DynamicTable::new();
        assert_eq!(t.insert(b"a", b"1"), Err(Malformed::Insert), "capacity 0");
        // Room for two 34-octet entries.
        t.set_capacity(68);
        for value in [b"1", b"2", b"3"] {
            t.insert(b"a", value).unwrap();
        }
        assert_eq!(t.insert_count(), 3);
        assert_eq!(t.get(0), None, "evicted");
        assert_eq!(t.get(1), Some((&b"a"[..], &b"2"[..])));
        assert_eq!(t.get(2), Some((&b"a"[..], &b"3"[..])));
        assert_eq!(t.get(3), None, "not yet inserted");
        assert_eq!(t.relative(0), t.get(2));
        assert_eq!(t.relative(1), t.get(1));
        assert_eq!(t.relative(2), None);
        assert_eq!(t.insert(&[b'n'; 30], b"xxxxxxx"), Err(Malformed::Insert));
        t.set_capacity(0);
        assert_eq!(t.get(2), None, "a capacity of 0 empties the table");
        assert_eq!(t.insert_count(), 3, "but the count stays");
    }
}

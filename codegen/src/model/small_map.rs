//! [`SmallMap`]: the ordered map of a function's few keys (its YAML keys, its
//! dispatch table).
//!
//! A `BTreeMap` allocates a node with room for eleven entries even for one; with
//! two such maps per function they were about a fifth of the memory of a loaded
//! PyTorch model. Most functions have one to five entries, so a sorted vector with
//! the room it needs is smaller and its lookups are as fast.

use std::borrow::Borrow;
use std::fmt;

/// An ordered map kept as a vector sorted by key: iteration in key order, lookup
/// by binary search, insertion in place.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SmallMap<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for SmallMap<K, V> {
    fn default() -> Self {
        SmallMap {
            entries: Vec::new(),
        }
    }
}

impl<K: Ord, V> SmallMap<K, V> {
    /// An empty map (no allocation).
    pub fn new() -> Self {
        Self::default()
    }

    fn find<Q: Ord + ?Sized>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        self.entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        SmallMap {
            entries: Vec::with_capacity(n),
        }
    }

    /// Room for one more entry, doubling from one (`Vec` would start at four).
    fn grow(&mut self) {
        if self.entries.len() == self.entries.capacity() {
            self.entries.reserve_exact(self.entries.len().max(1));
        }
    }

    /// The value of `key`.
    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    /// Whether `key` has a value.
    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; returns the value it replaces.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(key.borrow()) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.grow();
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// The value of `key`, inserting `make()` first when it has none.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(key.borrow()) {
            Ok(i) => i,
            Err(i) => {
                self.grow();
                self.entries.insert(i, (key, make()));
                i
            }
        };
        &mut self.entries[i].1
    }
}

impl<K, V> SmallMap<K, V> {
    /// Entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    /// Values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for SmallMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = SmallMap::new();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

impl<'a, K, V> IntoIterator for &'a SmallMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl<K: Ord + Borrow<Q>, Q: Ord + ?Sized, V> std::ops::Index<&Q> for SmallMap<K, V> {
    type Output = V;

    /// The value of `key`; panics when there is none (like `BTreeMap`'s index).
    fn index(&self, key: &Q) -> &V {
        self.get(key)
            .expect("no entry for this key in the SmallMap")
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for SmallMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::SmallMap;

    #[test]
    fn keeps_keys_sorted_and_replaces_values() {
        let mut m = SmallMap::new();
        assert_eq!(m.insert("b".to_string(), 2), None);
        assert_eq!(m.insert("a".to_string(), 1), None);
        assert_eq!(m.insert("c".to_string(), 3), None);
        assert_eq!(m.insert("b".to_string(), 20), Some(2));
        assert_eq!(
            m.keys().map(String::as_str).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(m.get("b"), Some(&20));
        assert_eq!(m["c"], 3);
        assert!(!m.contains_key("d"));
        *m.get_or_insert_with("d".into(), || 4) += 1;
        assert_eq!(m.get_or_insert_with("a".into(), || 100), &1);
        assert_eq!(m.values().copied().collect::<Vec<_>>(), [1, 20, 3, 5]);
        assert_eq!(format!("{m:?}"), r#"{"a": 1, "b": 20, "c": 3, "d": 5}"#);
    }
}

//! The keys of a configuration's JSON objects, marked as they are read, so that an unread
//! key is an error; and the agreement of keys that say the same thing.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// A message naming the key at fault.
pub(super) type Read<T> = std::result::Result<T, String>;

/// The keys of one JSON object, marked as they are read.
pub(super) struct Keys<'a> {
    pub(super) map: &'a Map<String, Value>,
    at: String,
    used: BTreeSet<&'a str>,
}

impl<'a> Keys<'a> {
    pub(super) fn new(map: &'a Map<String, Value>, at: &str) -> Self {
        Self {
            map,
            at: at.to_string(),
            used: BTreeSet::new(),
        }
    }

    pub(super) fn path(&self, key: &str) -> String {
        if self.at.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.at)
        }
    }

    /// The value of `key`, marked as read; JSON `null` reads as absent.
    pub(super) fn get(&mut self, key: &str) -> Option<&'a Value> {
        let (k, v) = self.map.get_key_value(key)?;
        self.used.insert(k.as_str());
        (!v.is_null()).then_some(v)
    }

    pub(super) fn typed<T>(
        &mut self,
        key: &str,
        what: &str,
        f: impl Fn(&'a Value) -> Option<T>,
    ) -> Read<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => f(v)
                .map(Some)
                .ok_or_else(|| format!("`{}` = {v}: expected {what}", self.path(key))),
        }
    }

    pub(super) fn f64(&mut self, key: &str) -> Read<Option<f64>> {
        self.typed(key, "a number", Value::as_f64)
    }

    pub(super) fn usize(&mut self, key: &str) -> Read<Option<usize>> {
        self.typed(key, "a whole number >= 0", |v| {
            v.as_u64()
                .or_else(|| {
                    v.as_f64()
                        .filter(|x| x.fract() == 0.0 && *x >= 0.0)
                        .map(|x| x as u64)
                })
                .and_then(|x| usize::try_from(x).ok())
        })
    }

    pub(super) fn bool(&mut self, key: &str) -> Read<Option<bool>> {
        self.typed(key, "true or false", Value::as_bool)
    }

    pub(super) fn str(&mut self, key: &str) -> Read<Option<&'a str>> {
        self.typed(key, "a string", Value::as_str)
    }

    pub(super) fn object(&mut self, key: &str) -> Read<Option<&'a Map<String, Value>>> {
        self.typed(key, "an object", Value::as_object)
    }

    pub(super) fn f64_list(&mut self, key: &str) -> Read<Option<Vec<f64>>> {
        self.typed(key, "a list of numbers", |v| {
            v.as_array()?.iter().map(Value::as_f64).collect()
        })
    }

    pub(super) fn str_list(&mut self, key: &str) -> Read<Option<Vec<String>>> {
        self.typed(key, "a list of strings", |v| {
            v.as_array()?
                .iter()
                .map(|x| x.as_str().map(String::from))
                .collect()
        })
    }

    /// Fails on the first key neither read nor in `known`.
    pub(super) fn finish(&self, known: &[&str], what: &str) -> Read<()> {
        match self
            .map
            .keys()
            .find(|k| !self.used.contains(k.as_str()) && !known.contains(&k.as_str()))
        {
            Some(k) => Err(format!("unknown key `{}`: {what}", self.path(k))),
            None => Ok(()),
        }
    }
}

/// The first of `values` that is given; two given values that differ are an error naming the
/// first key.
pub(super) fn agree<T: PartialEq + std::fmt::Display + Copy>(
    values: &[(String, Option<T>)],
) -> Read<Option<T>> {
    let given: Vec<(&String, T)> = values
        .iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    if let Some(((k1, v1), rest)) = given.split_first() {
        if let Some((k2, v2)) = rest.iter().find(|(_, v)| v != v1) {
            return Err(format!("`{k1}` = {v1} disagrees with `{k2}` = {v2}"));
        }
        return Ok(Some(*v1));
    }
    Ok(None)
}

//! apimachinery's `mergeMap` and `mergeSlice` (`strategicpatch/patch.go`) with the options
//! of `StrategicMergeMapPatchUsingLookupPatchMeta`, over `serde_json::Value` (what they do:
//! [`super`]'s header).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::PatchError;
use super::schema::{Field, NONE, Schema, field};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_LIST: &str = "$deleteFromPrimitiveList";
const SET_ORDER: &str = "$setElementOrder";

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// apimachinery's `mergeMap`.
pub(super) fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: Schema,
    path: &str,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(PatchError::BadDirective {
                path: path.into(),
                directive: directive.to_string(),
            }),
        };
    }
    retain_keys(&mut original, &mut patch, path)?;
    if let Some(key) = patch.keys().find(|k| k.starts_with(SET_ORDER)) {
        return Err(PatchError::SetElementOrder {
            path: path.into(),
            key: key.clone(),
        });
    }
    for (key, patch_value) in patch {
        let (key, delete_list) = if key.starts_with(DELETE_FROM_LIST) {
            match key.split_once('/') {
                Some((DELETE_FROM_LIST, field)) => (field.to_string(), true),
                _ => {
                    return Err(PatchError::BadDeleteList {
                        path: path.into(),
                        key,
                    });
                }
            }
        } else {
            (key, false)
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let sub = join(path, &key);
        let merged = match (original.remove(&key), patch_value) {
            (None, _) if delete_list => continue,
            (None, p) => without_directives(without_nulls(p)),
            (Some(Value::Object(o)), Value::Object(p)) => {
                Some(Value::Object(match field(schema, &key) {
                    Some(Field::Replace) => p,
                    Some(Field::Struct(s)) => merge_map(o, p, s, &sub)?,
                    _ => merge_map(o, p, NONE, &sub)?,
                }))
            }
            (Some(Value::Array(o)), Value::Array(p)) => {
                Some(Value::Array(match field(schema, &key) {
                    Some(Field::Keyed(merge_key, s)) => {
                        merge_list(o, p, merge_key, s, delete_list, &sub)?
                    }
                    Some(Field::Set) => merge_list(o, p, "", NONE, delete_list, &sub)?,
                    // A deletion list applies whatever the field's strategy.
                    _ if delete_list => merge_list(o, p, "", NONE, true, &sub)?,
                    _ => p,
                }))
            }
            (Some(o), _) if delete_list => Some(o),
            (Some(_), p) => without_directives(without_nulls(p)),
        };
        if let Some(v) = merged {
            original.insert(key, v);
        }
    }
    Ok(original)
}

/// apimachinery's `applyRetainKeysDirective`.
fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    path: &str,
) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let bad = || PatchError::BadRetainKeys { path: path.into() };
    let retain: HashSet<&str> = retain
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let listed = |k: &str| retain.contains(k);
    let unlisted = patch.iter().any(|(k, v)| {
        !v.is_null() && !k.starts_with(DELETE_FROM_LIST) && !k.starts_with(SET_ORDER) && !listed(k)
    });
    if unlisted {
        return Err(bad());
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

/// apimachinery's `discardNullValuesFromPatch`.
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(l) => Value::Array(l.into_iter().map(without_nulls).collect()),
        v => v,
    }
}

/// apimachinery's `removeDirectives`: `None` for a map with `$patch`, dropped with it.
fn without_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(m) if m.contains_key(DIRECTIVE) => None,
        Value::Object(m) => Some(Value::Object(
            m.into_iter()
                .filter_map(|(k, v)| without_directives(v).map(|v| (k, v)))
                .collect(),
        )),
        Value::Array(l) => Some(Value::Array(
            l.into_iter().filter_map(without_directives).collect(),
        )),
        v => Some(v),
    }
}

/// What identifies an element, as text (apimachinery compares with `==`): its merge key's
/// value, or itself for scalars; empty when it has no merge key.
fn ident(value: &Value, key: &str) -> String {
    let id = if key.is_empty() {
        Some(value)
    } else {
        value.get(key)
    };
    id.map(Value::to_string).unwrap_or_default()
}

/// Where each identity first appears in `list` (indexed: a patch is user input, and a
/// linear search per element would make a long list quadratic).
fn first_positions(list: &[Value], key: &str) -> HashMap<String, usize> {
    let mut at = HashMap::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        at.entry(ident(v, key)).or_insert(i);
    }
    at
}

/// apimachinery's `mergeSlice`, for a list with merge strategy (`key` empty for scalars).
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
    schema: Schema,
    delete_list: bool,
    path: &str,
) -> Result<Vec<Value>, PatchError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = |v: &Value| std::mem::discriminant(v);
    let first = original.iter().chain(&patch).next().map(kind);
    if original
        .iter()
        .chain(&patch)
        .any(|v| Some(kind(v)) != first || v.is_array())
    {
        return Err(PatchError::ElementTypes { path: path.into() });
    }
    let (original, patch, merged) = if !original.iter().chain(&patch).any(Value::is_object) {
        let in_patch: HashSet<String> = patch.iter().map(|v| ident(v, "")).collect();
        if delete_list {
            return Ok(original
                .into_iter()
                .filter(|v| !in_patch.contains(&ident(v, "")))
                .collect());
        }
        let mut seen = HashSet::new();
        let merged = original
            .iter()
            .chain(&patch)
            .filter(|v| seen.insert(ident(v, "")))
            .cloned()
            .collect();
        (original, patch, merged)
    } else {
        if key.is_empty() {
            return Err(PatchError::NoMergeKeyForList { path: path.into() });
        }
        let (original, patch) = special_elements(original, patch, key, path)?;
        let mut merged = original.clone();
        let mut at = first_positions(&merged, key);
        for p in &patch {
            if p.get(key).is_none() {
                return Err(no_key(path, key));
            }
            match at.get(&ident(p, key)) {
                Some(&i) => {
                    // Every element is an object (checked above).
                    if let (Value::Object(o), Value::Object(p)) = (merged[i].take(), p.clone()) {
                        merged[i] = Value::Object(merge_map(o, p, schema, path)?);
                    }
                }
                None => {
                    at.insert(ident(p, key), merged.len());
                    merged.push(p.clone());
                }
            }
        }
        if merged.iter().any(|v| v.get(key).is_none()) {
            return Err(no_key(path, key));
        }
        (original, patch, merged)
    };
    // apimachinery's `normalizeElementOrder`: the patch's elements in its order, the
    // others in the original's, interleaved by the original's.
    let in_patch = first_positions(&patch, key);
    let in_original = first_positions(&original, key);
    let position = |at: &HashMap<String, usize>, v: &Value| at.get(&ident(v, key)).copied();
    let (mut ours, mut theirs): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| position(&in_patch, v).is_some());
    ours.sort_by_cached_key(|v| position(&in_patch, v));
    theirs.sort_by_cached_key(|v| position(&in_original, v));
    let mut out = Vec::with_capacity(ours.len() + theirs.len());
    let (mut ours, mut theirs) = (ours.into_iter().peekable(), theirs.into_iter().peekable());
    loop {
        let take_theirs = match (theirs.peek(), ours.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(t), Some(o)) => matches!(
                (position(&in_original, t), position(&in_original, o)),
                (Some(ti), Some(oi)) if ti < oi
            ),
        };
        out.extend(if take_theirs {
            theirs.next()
        } else {
            ours.next()
        });
    }
    Ok(out)
}

fn no_key(path: &str, key: &str) -> PatchError {
    PatchError::NoMergeKey {
        path: path.into(),
        key: key.into(),
    }
}

/// apimachinery's `mergeSliceWithSpecialElements`: `$patch: delete` elements delete the
/// original's of their key, `$patch: replace` makes the rest of the patch the list.
fn special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
    path: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut rest = Vec::new();
    let mut deleted = HashSet::new();
    let mut replace = false;
    for p in patch {
        let Some(directive) = p.get(DIRECTIVE) else {
            rest.push(p);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                if p.get(key).is_none() {
                    return Err(no_key(path, key));
                }
                deleted.insert(ident(&p, key));
            }
            Some("replace") => replace = true,
            Some("merge") => return Err(PatchError::ListMergeDirective { path: path.into() }),
            _ => {
                return Err(PatchError::BadDirective {
                    path: path.into(),
                    directive: directive.to_string(),
                });
            }
        }
    }
    if replace {
        return Ok((rest, Vec::new()));
    }
    original.retain(|v| v.get(key).is_none() || !deleted.contains(&ident(v, key)));
    Ok((original, rest))
}

//! `nest.train(overrides=...)` / `nest.distill(overrides=...)`: a dict of recipe keys as typed
//! [`Overrides`], value by value (no command line in between): numbers, booleans, strings and
//! paths, lists and dicts become the TOML values they are; a `data` string keeps the CLI's
//! `path:format` shorthand. Errors name the key as the user wrote it: `overrides["lr"]`.

use std::path::PathBuf;

use nest_train::recipe::Overrides;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// The dict's items (key, value), in order.
pub(crate) fn from_items(items: Vec<(String, Bound<'_, PyAny>)>) -> PyResult<Overrides> {
    let mut ov = Overrides::new();
    for (key, value) in items {
        let origin = format!("overrides[{key:?}]");
        let v = to_toml(&value).map_err(|what| {
            PyValueError::new_err(format!(
                "{origin}: expected a number, bool, string, path, list or dict, got {what}"
            ))
        })?;
        ov.push(&key, v, origin);
    }
    Ok(ov)
}

/// One Python value as TOML; `Err` holds the Python type name of what cannot be.
fn to_toml(v: &Bound<'_, PyAny>) -> Result<toml::Value, String> {
    let type_name = || {
        v.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into())
    };
    let value = if v.is_instance_of::<PyBool>() {
        v.extract::<bool>().ok().map(toml::Value::Boolean)
    } else if v.is_instance_of::<PyInt>() {
        v.extract::<i64>().ok().map(toml::Value::Integer)
    } else if v.is_instance_of::<PyFloat>() {
        v.extract::<f64>().ok().map(toml::Value::Float)
    } else if v.is_instance_of::<PyString>() {
        v.extract::<String>().ok().map(toml::Value::String)
    } else if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Result<Vec<_>, _> = v
            .try_iter()
            .map_err(|_| type_name())?
            .map(|i| i.map_err(|_| type_name()).and_then(|i| to_toml(&i)))
            .collect();
        Some(toml::Value::Array(items?))
    } else if let Ok(d) = v.cast::<PyDict>() {
        let mut t = toml::Table::new();
        for (k, i) in d.iter() {
            let k: String = k.extract().map_err(|_| type_name())?;
            t.insert(k, to_toml(&i)?);
        }
        Some(toml::Value::Table(t))
    } else if let Ok(i) = v.extract::<i64>() {
        // an integer that is not a Python int (numpy.int64: through __index__)
        Some(toml::Value::Integer(i))
    } else {
        // os.PathLike (pathlib.Path)
        v.extract::<PathBuf>()
            .ok()
            .map(|p| toml::Value::String(p.display().to_string()))
    };
    value.ok_or_else(type_name)
}

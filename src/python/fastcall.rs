//! `gather` and `gather_nd` read their arguments here instead of through
//! PyO3's generated parser. A service calls them with a keyword on every
//! request (`out=`, `dtype=`, `mode=`), and PyO3 turns each keyword's name
//! into UTF-8 and compares it as text with every parameter's name, a tenth
//! of a one-row call. Keyword names in Python code are interned strings, so here a name
//! is first compared by address with the interned parameter names; any
//! other string object is compared by value, so every call PyO3 accepted
//! is accepted, with the same errors.
//!
//! The functions stay defined with `#[pyfunction]` (their docs and text
//! signatures are read from those at import), and the registered function
//! calls the same Rust function with the arguments found here.
//!
//! They are registered through PyO3's trampoline (`pyo3::impl_`, hidden
//! from its docs and outside its semver promise), so Cargo.toml pins PyO3
//! to the exact version this was written for (0.30.1): any other fails to
//! resolve at build time rather than compiling against a trampoline that
//! may have changed.

use std::ffi::CString;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCFunction, PyString, PyTuple};

/// The parameters of a function, as a Python signature lists them: the
/// first [`REQUIRED`] positional ones (`data`, `indices`) have no default,
/// every other one has.
pub(crate) struct Signature {
    /// The function's name, for error messages.
    pub name: &'static str,
    /// Positional-or-keyword parameters, in order.
    pub positional: &'static [&'static str],
    /// Keyword-only parameters.
    pub keyword_only: &'static [&'static str],
    /// Every name of `positional` then `keyword_only`, interned, made once.
    pub interned: PyOnceLock<Vec<Py<PyString>>>,
}

/// At most this many parameters (`gather` has 7).
pub(crate) const MAX_PARAMS: usize = 8;

/// How many positional parameters come first without a default.
const REQUIRED: usize = 2;

/// One slot per parameter, in the order of the signature: `None` where
/// the call passed nothing.
type Slots<'a, 'py> = [Option<Borrowed<'a, 'py, PyAny>>; MAX_PARAMS];

/// A call's arguments: the required two (`data`, `indices`), then a slot
/// for each parameter after them.
pub(crate) type Parsed<'a, 'py> = (
    Borrowed<'a, 'py, PyAny>,
    Borrowed<'a, 'py, PyAny>,
    [Option<Borrowed<'a, 'py, PyAny>>; MAX_PARAMS - REQUIRED],
);

impl Signature {
    fn names(&self) -> impl Iterator<Item = &'static str> {
        self.positional.iter().chain(self.keyword_only).copied()
    }

    pub(crate) fn interned<'a>(&'a self, py: Python<'_>) -> &'a [Py<PyString>] {
        self.interned.get_or_init(py, || {
            self.names()
                .map(|n| PyString::intern(py, n).unbind())
                .collect()
        })
    }

    /// The parameter slot that keyword `name` fills, if any: by address
    /// among the interned names, else by value.
    fn slot_of(&self, py: Python<'_>, name: Borrowed<'_, '_, PyAny>) -> Option<usize> {
        let interned = self.interned(py);
        if let Some(i) = interned.iter().position(|n| n.as_ptr() == name.as_ptr()) {
            return Some(i);
        }
        let name = name.cast::<PyString>().ok()?;
        let text = name.to_str().ok()?;
        self.names().position(|n| n == text)
    }

    /// Sorts the arguments of a vectorcall into slots, with the `TypeError`
    /// CPython and PyO3 give for too many, unknown, repeated or missing
    /// arguments.
    ///
    /// # Safety
    /// `args` holds `nargs` positional arguments followed by one value for
    /// each name in `kwnames` (a tuple of strings, or null), all borrowed
    /// for `'a`: the vectorcall convention.
    #[inline(always)]
    pub(crate) unsafe fn parse<'a, 'py>(
        &self,
        py: Python<'py>,
        args: *const *mut ffi::PyObject,
        nargs: ffi::Py_ssize_t,
        kwnames: *mut ffi::PyObject,
    ) -> PyResult<Parsed<'a, 'py>> {
        debug_assert!(self.positional.len() + self.keyword_only.len() <= MAX_PARAMS);
        let mut slots: Slots<'a, 'py> = [None; MAX_PARAMS];
        let nargs = usize::try_from(nargs).unwrap_or(0);
        let (name, most) = (self.name, self.positional.len());
        if nargs > most {
            return Err(PyTypeError::new_err(format!(
                "{name}() takes from {REQUIRED} to {most} positional arguments but {nargs} were given"
            )));
        }
        let at = |i: usize| {
            // SAFETY: i < nargs + len(kwnames), inside `args` (the caller's
            // contract); each is a live object borrowed for 'a.
            unsafe { Borrowed::from_ptr(py, *args.add(i)) }
        };
        for (i, slot) in slots.iter_mut().enumerate().take(nargs) {
            *slot = Some(at(i));
        }
        if !kwnames.is_null() {
            // SAFETY: kwnames is a tuple (the vectorcall convention), alive
            // for the call.
            let names = unsafe { Borrowed::from_ptr(py, kwnames).cast_unchecked::<PyTuple>() };
            for (k, key) in names.iter_borrowed().enumerate() {
                let Some(i) = self.slot_of(py, key) else {
                    let key = key.str().map_or_else(|_| "?".into(), |s| s.to_string());
                    return Err(PyTypeError::new_err(format!(
                        "{name}() got an unexpected keyword argument '{key}'"
                    )));
                };
                if slots[i].replace(at(nargs + k)).is_some() {
                    let param = self.names().nth(i).unwrap_or("?");
                    return Err(PyTypeError::new_err(format!(
                        "{name}() got multiple values for argument '{param}'"
                    )));
                }
            }
        }
        let [Some(data), Some(indices), rest @ ..] = slots else {
            return Err(self.missing(&slots));
        };
        Ok((data, indices, rest))
    }

    /// The `TypeError` for required arguments missing from `slots`.
    #[cold]
    fn missing(&self, slots: &Slots<'_, '_>) -> PyErr {
        let missing: Vec<String> = self.positional[..REQUIRED]
            .iter()
            .zip(slots)
            .filter(|(_, s)| s.is_none())
            .map(|(n, _)| format!("'{n}'"))
            .collect();
        let (name, n, list) = (self.name, missing.len(), missing.join(" and "));
        let s = if n == 1 { "" } else { "s" };
        PyTypeError::new_err(format!(
            "{name}() missing {n} required positional argument{s}: {list}"
        ))
    }
}

/// The value of an argument extracted as `T`, or `default` where none was
/// passed; an error notes the parameter, as PyO3's does.
#[inline(always)]
pub(crate) fn extract_or<'a, 'py, T: FromPyObject<'a, 'py, Error = PyErr>>(
    arg: Option<Borrowed<'a, 'py, PyAny>>,
    name: &str,
    default: T,
) -> PyResult<T> {
    let Some(arg) = arg else {
        return Ok(default);
    };
    arg.extract::<T>().map_err(|e| named(arg.py(), name, e))
}

/// An error from extracting argument `name`, with the note PyO3 adds to
/// it ("while processing 'name'", where Python has `add_note`).
#[cold]
fn named(py: Python<'_>, name: &str, e: PyErr) -> PyErr {
    // Without `add_note` (Python 3.10) the error goes as it is, as PyO3's.
    let _ = e
        .value(py)
        .call_method1("add_note", (format!("while processing '{name}'"),));
    e
}

/// Adds to `m` a builtin named as `signature` says, with the docstring and
/// text signature of `documented` (the `#[pyfunction]` of that name and
/// those parameters), whose calls `meth` handles (the C function of a
/// vectorcall builtin: PyO3's trampoline around a parser, which attaches
/// the thread's token and turns a panic into an exception). The
/// signature's interned names are made here, at import, as the other
/// one-time cells are (`cells.rs`): no child forked during a first call
/// finds one half made.
pub(crate) fn add(
    m: &Bound<'_, PyModule>,
    documented: &Bound<'_, PyCFunction>,
    signature: &Signature,
    meth: ffi::PyCFunctionFastWithKeywords,
) -> PyResult<()> {
    signature.interned(m.py());
    let text_signature: String = documented.getattr("__text_signature__")?.extract()?;
    let doc: String = documented.getattr("__doc__")?.extract()?;
    // CPython reads a builtin's `__text_signature__` from the head of its
    // docstring: "name(...)\n--\n\n".
    let name = signature.name;
    let doc = CString::new(format!("{name}{text_signature}\n--\n\n{doc}"))?;
    // The definition must live as long as the function object, which may
    // be kept past the module's life: made once per import, never freed.
    let def: &'static mut ffi::PyMethodDef = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: Box::leak(CString::new(name)?.into_boxed_c_str()).as_ptr(),
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: meth,
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: Box::leak(doc.into_boxed_c_str()).as_ptr(),
    }));
    let module_name = m.name()?;
    // SAFETY: `def` is a valid, 'static method definition of a fastcall
    // function with keywords; `m` and its name are live objects. The new
    // reference returned (or null with an exception set) is taken over.
    let function = unsafe {
        Bound::from_owned_ptr_or_err(
            m.py(),
            ffi::PyCFunction_NewEx(def, m.as_ptr(), module_name.as_ptr()),
        )?
    };
    m.add(name, function)
}

/* toolseam._speedups: the checked copy of a JSON argument, in one C pass.
 *
 * `copy_json(value, dict_type, list_type)` is the fast path of `toolseam._json`'s snapshot
 * walk done in C: it copies an exact ``dict``, ``list`` or ``tuple`` into containers of
 * ``dict_type`` and ``list_type`` (plain ``dict``/``list``, or the frozen snapshot types)
 * and says whether every string in it (keys included) is UTF-8. It accepts only what that
 * fast path accepts without a second look: exact ``dict`` with exact ``str`` keys, exact
 * ``list`` and ``tuple``, exact ``str``, ``int`` within 64 bits, finite ``float`` other
 * than ``-0.0``, ``bool`` and ``None``. On anything else (a subclass, a snapshot taken
 * earlier, a cycle, more than MAX_DEPTH levels, or sharing beyond the budget below) it
 * returns ``None``, and the Python walk decides: it builds the same snapshot or reports the
 * first problem with its path. tests/test_speedups.py pins its outcome to the full walk's.
 *
 * A container met more than once without a cycle (records built with ``dict(item, id=i)``
 * share their lists) is copied at each occurrence: snapshots are immutable, so shared and
 * separate copies are the same value. Copying each occurrence of an exponential DAG (a
 * list holding one list twice, that one another twice, ...) would never end, so the items
 * of repeated containers are counted against a budget, REPEAT_BASE plus REPEAT_FACTOR times
 * the items of containers met for the first time; past it the pass gives up, and the
 * Python walk, which copies each container once, takes the value.
 *
 * It runs no Python code: every object it reads is of an exact built-in type, so no
 * ``__eq__``, ``__hash__`` or ``__iter__`` of a caller's class can run while it walks.
 * Each container is copied by one C call first and then read from the copy, so a container
 * that a finalizer (run by a collection during an allocation) changes is seen in one
 * consistent state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#define MAX_DEPTH 512 /* containers nested in one another */
#define REPEAT_BASE 65536 /* items of repeated containers copied before the factor counts */
#define REPEAT_FACTOR 8   /* ... then so many per item met for the first time */

typedef struct {
    void **slots;
    size_t mask;
    int shift; /* 64 - log2(mask + 1): the product's high bits pick the slot */
    size_t used;
} Seen;

typedef struct {
    PyTypeObject *dict_type;
    PyTypeObject *list_type;
    Seen seen;
    int utf8;
    int fallback;
    size_t first_items;  /* items of the containers met for the first time */
    size_t repeat_items; /* items of the containers met again (copied again) */
    PyObject *path[MAX_DEPTH]; /* path[0..depth): the containers being copied (a cycle's) */
} Walk;

static PyObject *empty_tuple;

static inline size_t
slot_of(void *pointer, int shift)
{
    return (size_t)(((uint64_t)(uintptr_t)pointer * 0x9E3779B97F4A7C15ULL) >> shift);
}

/* 1: added; 0: met before; -1: out of memory (exception set). */
static int
seen_add(Seen *seen, void *pointer)
{
    if ((seen->used + 1) * 2 > seen->mask + 1) {
        size_t size = (seen->mask + 1) * 2;
        int shift = seen->shift - 1;
        void **slots = PyMem_Calloc(size, sizeof(void *));
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i <= seen->mask; i++) {
            void *old = seen->slots[i];
            if (old != NULL) {
                size_t j = slot_of(old, shift);
                while (slots[j] != NULL) {
                    j = (j + 1) & (size - 1);
                }
                slots[j] = old;
            }
        }
        PyMem_Free(seen->slots);
        seen->slots = slots;
        seen->mask = size - 1;
        seen->shift = shift;
    }
    size_t i = slot_of(pointer, seen->shift);
    while (seen->slots[i] != NULL) {
        if (seen->slots[i] == pointer) {
            return 0;
        }
        i = (i + 1) & seen->mask;
    }
    seen->slots[i] = pointer;
    seen->used++;
    return 1;
}

/* A lone surrogate is the one thing a str may hold that UTF-8 cannot encode. */
static int
has_surrogate(PyObject *text)
{
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (kind == PyUnicode_1BYTE_KIND) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < length; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0xD800 && c <= 0xDFFF) {
            return 1;
        }
    }
    return 0;
}

/* Whether the characters of an exact str can be read (always, from CPython 3.12 on; on
 * 3.11 a string made by the deprecated PyUnicode_FromUnicode may not be ready yet, and
 * the Python walk takes it). */
static inline int
text_ready(PyObject *text)
{
#if PY_VERSION_HEX < 0x030C0000
    return PyUnicode_IS_READY(text);
#else
    (void)text;
    return 1;
#endif
}

static inline void
check_text(Walk *walk, PyObject *text)
{
    if (walk->utf8 && !PyUnicode_IS_ASCII(text) && has_surrogate(text)) {
        walk->utf8 = 0;
    }
}

static PyObject *copy_container(Walk *walk, PyObject *value, int depth);

/* A finished copy holds only leaves and other finished copies: it can never be part of a
 * reference cycle (nothing else holds it yet, a snapshot cannot be changed, and the
 * registry's private plain copy is only read: no part of it ever reaches a tool body, as
 * tests/test_perf_levels.py checks), so the cycle collector need not look at it, as it
 * need not look at a tuple of ints. Code that changed a copy into a cycle would leak it. Left
 * tracked, a large argument's copies made every collection during the call traverse them:
 * half the time of taking in 1 MB of nested records went to the collector. */
static inline void
untrack(PyObject *copy)
{
    if (PyObject_GC_IsTracked(copy)) {
        PyObject_GC_UnTrack(copy);
    }
}

/* 1: a leaf the fast path accepts; 2: a container to copy; 0: fall back. */
static inline int
classify(Walk *walk, PyObject *item)
{
    PyTypeObject *type = Py_TYPE(item);
    if (type == &PyUnicode_Type) {
        if (!text_ready(item)) {
            return 0;
        }
        check_text(walk, item);
        return 1;
    }
    if (type == &PyLong_Type) {
        int overflow;
        (void)PyLong_AsLongLongAndOverflow(item, &overflow);
        return overflow ? 0 : 1;
    }
    if (type == &PyFloat_Type) {
        double number = PyFloat_AS_DOUBLE(item);
        if (!isfinite(number) || (number == 0.0 && signbit(number))) {
            return 0;
        }
        return 1;
    }
    if (type == &PyBool_Type || item == Py_None) {
        return 1;
    }
    if (type == &PyDict_Type || type == &PyList_Type || type == &PyTuple_Type) {
        return 2;
    }
    return 0;
}

static PyObject *
copy_dict(Walk *walk, PyObject *source, int depth)
{
    /* Every key an exact str first: copying a dict compares keys whose hashes collide, and
     * only for exact strs does that run no Python code (a key's own __eq__ could do
     * anything, the collector being off included). Reading the entries runs none. */
    Py_ssize_t position = 0;
    PyObject *key, *item;
    while (PyDict_Next(source, &position, &key, &item)) {
        if (Py_TYPE(key) != &PyUnicode_Type || !text_ready(key)) {
            walk->fallback = 1;
            return NULL;
        }
    }
    PyObject *copy;
    if (walk->dict_type == &PyDict_Type) {
        copy = PyDict_Copy(source);
    }
    else {
        copy = PyDict_Type.tp_new(walk->dict_type, empty_tuple, NULL);
        if (copy != NULL && PyDict_Update(copy, source) < 0) {
            Py_CLEAR(copy);
        }
    }
    if (copy == NULL) {
        return NULL;
    }
    position = 0;
    while (PyDict_Next(copy, &position, &key, &item)) {
        if (Py_TYPE(key) != &PyUnicode_Type) {
            goto fallback; /* checked above; kept so that no path reads a key otherwise */
        }
        check_text(walk, key);
        int kind = classify(walk, item);
        if (kind == 0) {
            goto fallback;
        }
        if (kind == 2) {
            PyObject *child = copy_container(walk, item, depth + 1);
            if (child == NULL) {
                Py_DECREF(copy);
                return NULL;
            }
            /* Replacing the value of a key the copy holds: allowed while iterating. */
            int failed = PyDict_SetItem(copy, key, child);
            Py_DECREF(child);
            if (failed < 0) {
                Py_DECREF(copy);
                return NULL;
            }
        }
    }
    untrack(copy);
    return copy;
fallback:
    walk->fallback = 1;
    Py_DECREF(copy);
    return NULL;
}

static PyObject *
copy_list(Walk *walk, PyObject *source, int depth)
{
    PyObject *copy;
    if (walk->list_type == &PyList_Type) {
        copy = PySequence_List(source);
    }
    else {
        copy = PyList_Type.tp_new(walk->list_type, empty_tuple, NULL);
        if (copy != NULL && PyList_SetSlice(copy, 0, 0, source) < 0) {
            Py_CLEAR(copy);
        }
    }
    if (copy == NULL) {
        return NULL;
    }
    Py_ssize_t length = PyList_GET_SIZE(copy);
    for (Py_ssize_t i = 0; i < length; i++) {
        PyObject *item = PyList_GET_ITEM(copy, i);
        int kind = classify(walk, item);
        if (kind == 0) {
            walk->fallback = 1;
            Py_DECREF(copy);
            return NULL;
        }
        if (kind == 2) {
            PyObject *child = copy_container(walk, item, depth + 1);
            if (child == NULL) {
                Py_DECREF(copy);
                return NULL;
            }
            PyList_SET_ITEM(copy, i, child); /* the copy's reference to item goes too */
            Py_DECREF(item);
        }
    }
    untrack(copy);
    return copy;
}

static PyObject *
copy_container(Walk *walk, PyObject *value, int depth)
{
    if (depth >= MAX_DEPTH) {
        walk->fallback = 1;
        return NULL;
    }
    /* The empty tuple is one object however often it appears; it holds nothing to loop. */
    if (Py_TYPE(value) != &PyTuple_Type || PyTuple_GET_SIZE(value) != 0) {
        size_t items = (size_t)Py_SIZE(value); /* PyVarObject: list and tuple */
        if (Py_TYPE(value) == &PyDict_Type) {
            items = (size_t)PyDict_GET_SIZE(value);
        }
        int added = seen_add(&walk->seen, value);
        if (added < 0) {
            return NULL;
        }
        if (added) {
            walk->first_items += items;
        }
        else {
            /* Met before: a cycle if it is being copied (only then can it be met again
             * before its copy is done), else shared: copied again, within the budget. */
            for (int i = 0; i < depth; i++) {
                if (walk->path[i] == value) {
                    walk->fallback = 1; /* the Python walk reports the cycle */
                    return NULL;
                }
            }
            walk->repeat_items += items;
            if (walk->repeat_items > REPEAT_BASE + REPEAT_FACTOR * walk->first_items) {
                walk->fallback = 1; /* an exponential DAG: the Python walk copies once */
                return NULL;
            }
        }
    }
    walk->path[depth] = value;
    /* Held while it is copied: it stays alive whatever its parent copy becomes. */
    Py_INCREF(value);
    PyObject *copy = Py_TYPE(value) == &PyDict_Type ? copy_dict(walk, value, depth)
                                                     : copy_list(walk, value, depth);
    Py_DECREF(value);
    return copy;
}

/* A container type the pass may build: the base type, or a subclass of it that adds no
 * state of its own (no slots, no __dict__), as the snapshot types are; their instances are
 * made by the base type's constructor and filled directly. */
static int
buildable(PyObject *type, PyTypeObject *base)
{
    if (!PyType_Check(type)) {
        return 0;
    }
    PyTypeObject *candidate = (PyTypeObject *)type;
    return candidate == base ||
           (PyType_IsSubtype(candidate, base) && candidate->tp_basicsize == base->tp_basicsize &&
            candidate->tp_dictoffset == 0);
}

static PyObject *
copy_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "copy_json() takes exactly 3 arguments");
        return NULL;
    }
    PyObject *value = args[0];
    if (!buildable(args[1], &PyDict_Type) || !buildable(args[2], &PyList_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "copy_json() takes dict (or a subclass with no state of its own) and "
                        "list (likewise) after the value");
        return NULL;
    }
    PyTypeObject *type = Py_TYPE(value);
    if (type != &PyDict_Type && type != &PyList_Type && type != &PyTuple_Type) {
        Py_RETURN_NONE;
    }
    /* Field by field: an initializer would clear the 4 KB path, which is only read below
     * the depth reached, where it was written. */
    Walk walk;
    walk.dict_type = (PyTypeObject *)args[1];
    walk.list_type = (PyTypeObject *)args[2];
    walk.seen.mask = 63;
    walk.seen.shift = 58;
    walk.seen.used = 0;
    walk.utf8 = 1;
    walk.fallback = 0;
    walk.first_items = 0;
    walk.repeat_items = 0;
    walk.seen.slots = PyMem_Calloc(64, sizeof(void *));
    if (walk.seen.slots == NULL) {
        return PyErr_NoMemory();
    }
    /* No collection while the pass runs: it could free nothing the pass makes (every copy
     * is left out of the collector once finished), yet on CPython 3.11, which collects
     * inside allocations, the copies of a large argument set off one every 700
     * containers, and each pushed the collector's older generations along. This is what
     * 3.12 does anyway, where a collection waits for the next bytecode. With the GIL held
     * and no Python code run in between, no other thread can see or change the setting. */
    int collecting = PyGC_Disable();
    PyObject *copy = copy_container(&walk, value, 0);
    if (collecting) {
        PyGC_Enable();
    }
    PyMem_Free(walk.seen.slots);
    if (copy == NULL) {
        if (walk.fallback && !PyErr_Occurred()) {
            Py_RETURN_NONE;
        }
        return NULL;
    }
    PyObject *result = Py_BuildValue("(NO)", copy, walk.utf8 ? Py_True : Py_False);
    return result;
}

static PyMethodDef methods[] = {
    {"copy_json", (PyCFunction)(void (*)(void))copy_json, METH_FASTCALL,
     "copy_json(value, dict_type, list_type, /)\n--\n\n"
     "The checked copy of a JSON value and whether all its text is UTF-8, or None when "
     "the Python walk must decide."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "toolseam._speedups",
    "The checked copy of a JSON argument, in one C pass (see toolseam._json).",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (empty_tuple == NULL) {
        empty_tuple = PyTuple_New(0);
        if (empty_tuple == NULL) {
            return NULL;
        }
    }
    return PyModule_Create(&module);
}

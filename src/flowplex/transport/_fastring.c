/* The ring's one-message hot paths in C: Producer.send and Consumer.recv of one message (one
 * slot, or the fragments of a longer one), when everything is as expected.
 *
 * Why C: in pure Python one send or recv costs about a microsecond, nearly all of it
 * interpreter overhead (argument parsing, struct packing, building the Message), which caps a
 * ring at roughly half a million single messages per second between two processes.  Here the
 * same work is a memcpy and two atomic accesses.
 *
 * What stays in Python: everything else.  Whenever a call is not the plain case (a payload
 * that is not bytes or str, more than one slot, a full lane, an argument out of range, a
 * closed mapping, a fragment or corrupt header on the consuming side, an empty lane), the C
 * function forwards the call, arguments untouched, to the pure-Python implementation it was
 * built with, which owns every error message and every slow path.  The two implementations
 * share their state through this module's objects (Writer.tail/limit/extra, Reader.cur/solo,
 * Lane.head/avail), so either may run any call.
 *
 * Memory ordering (the argument is in _ordering.py): the slot is written with plain stores and
 * published by a release store of the lane's tail; the consumer acquire-loads the tail before it
 * reads the slot and release-stores head after it copied the slot.  The GCC/Clang __atomic
 * builtins give exactly those orderings on x86-64 and arm64 alike.
 *
 * The mapping is borrowed per call through the buffer protocol, never held: a closed ring makes
 * the borrow fail, and the call goes to the Python path, which raises ClosedError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ring layout is little-endian; big-endian hosts use the pure-Python path"
#endif

#define SLOT_SIZE 256
#define HEADER_SIZE 32
#define PAYLOAD_SIZE 224
#define FLAG_CONTINUES 0x1
#define FLAG_FIRST 0x2
#define FLAG_TEXT 0x8

#define MAX_FRAGMENTS 128 /* longer messages (over ~28 KiB) take the Python path */
#define MAX_ESCAPE 64
#define MAX_POSITION ((1ull << 62) - 1) /* _core.MAX_POSITION: a larger position is a corrupt word */
/* Word indices within a lane header (see _layout.py; _accel checks they still agree). */
#define L_EXTRA_SLOTS 11
#define L_FRAGMENTED 12
#define L_PRODUCER_HWM 14
#define L_HEAD 16
#define L_CONSUMER_EXTRA 24
#define L_REASSEMBLED 25

static PyObject *str_stream_id, *str_agent_type, *str_timestamp_ns, *str_timeout;

/* ---------------------------------------------------------------------------------------- */
/* Cut points: a C port of _fragment.cut_points, which stays the reference (tests compare).  */

static int escape_closed(const unsigned char *d, Py_ssize_t start, Py_ssize_t stop) {
    Py_ssize_t i = start + 1;
    if (i >= stop) {
        return 0;
    }
    unsigned char kind = d[i];
    if (kind == 0x5B) { /* CSI: ends at a final byte 0x40-0x7E */
        for (Py_ssize_t j = i + 1; j < stop; j++) {
            if (d[j] >= 0x40 && d[j] <= 0x7E) return 1;
        }
        return 0;
    }
    if (kind == 0x5D || kind == 0x50 || kind == 0x5F || kind == 0x5E) { /* OSC/DCS/APC/PM: BEL or ESC \ */
        for (Py_ssize_t j = i + 1; j < stop; j++) {
            if (d[j] == 0x07 || (d[j] == 0x1B && j + 1 < stop && d[j + 1] == 0x5C)) return 1;
        }
        return 0;
    }
    while (kind >= 0x20 && kind <= 0x2F) { /* nF: intermediates, then one final byte */
        i++;
        if (i >= stop) return 0;
        kind = d[i];
    }
    return 1;
}

/* Fill ends[] with the fragment end offsets of d[0:n]; return their count, or -1 if over max. */
static int cut_points(const unsigned char *d, Py_ssize_t n, Py_ssize_t *ends, int max) {
    Py_ssize_t pos = 0;
    int k = 0;
    while (n - pos > PAYLOAD_SIZE) {
        Py_ssize_t end = pos + PAYLOAD_SIZE;
        Py_ssize_t back = end; /* d[end] starts the next fragment: not a UTF-8 continuation byte */
        while (back > end - 3 && back > pos + 1 && (d[back] & 0xC0) == 0x80) back--;
        if ((d[back] & 0xC0) != 0x80) end = back;
        Py_ssize_t lo = end - MAX_ESCAPE > pos + 1 ? end - MAX_ESCAPE : pos + 1;
        for (Py_ssize_t j = end - 1; j >= lo; j--) { /* never inside an escape that fits a fragment */
            if (d[j] == 0x1B) {
                if (!escape_closed(d, j, end)) end = j;
                break;
            }
        }
        if (k + 1 >= max) return -1;
        ends[k++] = end;
        pos = end;
    }
    ends[k++] = n;
    return k;
}

/* ---------------------------------------------------------------------------------------- */
/* Lane: the consumer's view of one producer lane (the fields _consumer._PyLane also has).   */

typedef struct {
    PyObject_HEAD
    long long head;     /* slots released so far */
    long long avail;    /* cached tail: slots in [head, avail) are published */
    long long base;     /* byte offset of the lane's slot 0 */
    long long tail_i;   /* word index of the producer's tail */
    long long head_i;   /* word index of the consumer's head */
    long long index;    /* the lane number (Message.producer_id) */
    long long words;    /* word index of the lane header */
    long long next_msg; /* msg_id expected next */
    PyObject *slots;    /* numpy view of the lane's slots, made by recv_many */
} Lane;

static int Lane_traverse(Lane *self, visitproc visit, void *arg) {
    Py_VISIT(self->slots);
    return 0;
}

static int Lane_clear(Lane *self) {
    Py_CLEAR(self->slots);
    return 0;
}

static void Lane_dealloc(Lane *self) {
    PyObject_GC_UnTrack(self);
    Lane_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Lane_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Lane *self = (Lane *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->slots = Py_NewRef(Py_None);
    }
    return (PyObject *)self;
}

static PyMemberDef Lane_members[] = {
    {"head", T_LONGLONG, offsetof(Lane, head), 0, "Slots released so far."},
    {"avail", T_LONGLONG, offsetof(Lane, avail), 0, "Cached tail: slots below it are published."},
    {"base", T_LONGLONG, offsetof(Lane, base), 0, "Byte offset of the lane's first slot."},
    {"tail_i", T_LONGLONG, offsetof(Lane, tail_i), 0, "Word index of the producer's tail."},
    {"head_i", T_LONGLONG, offsetof(Lane, head_i), 0, "Word index of the consumer's head."},
    {"index", T_LONGLONG, offsetof(Lane, index), 0, "The lane number."},
    {"words", T_LONGLONG, offsetof(Lane, words), 0, "Word index of the lane header."},
    {"next_msg", T_LONGLONG, offsetof(Lane, next_msg), 0, "msg_id expected next."},
    {"slots", T_OBJECT, offsetof(Lane, slots), 0, "NumPy view of the slots (or None)."},
    {NULL},
};

static PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "flowplex.transport._fastring.Lane",
    .tp_doc = PyDoc_STR("The consumer's private view of one producer lane."),
    .tp_basicsize = sizeof(Lane),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = Lane_new,
    .tp_dealloc = (destructor)Lane_dealloc,
    .tp_traverse = (traverseproc)Lane_traverse,
    .tp_clear = (inquiry)Lane_clear,
    .tp_members = Lane_members,
};

/* ---------------------------------------------------------------------------------------- */
/* Helpers                                                                                   */

/* Borrow a writable view of the mapping; 0 on success, -1 (error cleared) when it is closed. */
static int borrow(PyObject *mm, Py_buffer *view, long long end) {
    if (PyObject_GetBuffer(mm, view, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        return -1;
    }
    if (end > view->len) { /* cannot happen for a well-formed ring; stay safe anyway */
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* An int argument in [0, max], or -1 when it is anything else (the Python path then reports it). */
static long long small_uint(PyObject *obj, unsigned long long max) {
    if (!PyLong_Check(obj)) {
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow != 0 || v < 0 || (unsigned long long)v > max) {
        PyErr_Clear();
        return -1;
    }
    return v;
}

/* Whether the fault guard absorbed a fault in the mapping of ``token`` (defined with the guard). */
static int guard_is_tripped(long long token);

/* ---------------------------------------------------------------------------------------- */
/* Writer: one producer lane's hot state and send().                                        */

typedef struct {
    PyObject_HEAD
    PyObject *mm;      /* the mmap of the ring segment */
    PyObject *py_send; /* the pure-Python send, called for everything that is not the plain case */
    long long base;    /* byte offset of the lane's slot 0 */
    long long tail_off; /* byte offset of the lane's tail word */
    long long lane_off; /* byte offset of the lane header (statistics words, head) */
    long long mask;
    long long lane;
    long long tail;    /* slots published */
    long long limit;   /* cached head + capacity (-1: always take the Python path) */
    long long extra;   /* extra slots of fragmented messages; msg_id = tail - extra */
    long long guard;   /* the ring mapping's fault-guard token (-1: unguarded) */
} Writer;

static int Writer_traverse(Writer *self, visitproc visit, void *arg) {
    Py_VISIT(self->mm);
    Py_VISIT(self->py_send);
    return 0;
}

static int Writer_clear(Writer *self) {
    Py_CLEAR(self->mm);
    Py_CLEAR(self->py_send);
    return 0;
}

static void Writer_dealloc(Writer *self) {
    PyObject_GC_UnTrack(self);
    Writer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Writer_init(Writer *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"mm", "base", "tail_off", "lane_off", "mask", "lane", NULL};
    PyObject *mm;
    long long base, tail_off, lane_off, mask, lane;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLLLLL", kwlist, &mm, &base, &tail_off, &lane_off, &mask, &lane)) {
        return -1;
    }
    self->lane_off = lane_off;
    Py_XSETREF(self->mm, Py_NewRef(mm));
    self->base = base;
    self->tail_off = tail_off;
    self->mask = mask;
    self->lane = lane;
    self->limit = -1;
    self->guard = -1;
    return 0;
}

static PyObject *forward_send(Writer *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (self->py_send == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "send: the producer has no Python path (not initialised)");
        return NULL;
    }
    return PyObject_Vectorcall(self->py_send, args, nargsf, kwnames);
}

static PyObject *Writer_send(Writer *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    size_t nargsf = (size_t)nargs;
    if (nargs != 1) {
        return forward_send(self, args, nargsf, kwnames);
    }
    PyObject *data = args[0];
    long long stream_id = 0, agent_type = 2;
    PyObject *ts_obj = Py_None;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        PyObject *value = args[1 + i];
        if (key == str_stream_id) {
            stream_id = small_uint(value, 0xFFFFFFFFull);
        } else if (key == str_agent_type) {
            agent_type = small_uint(value, 7);
        } else if (key == str_timestamp_ns) {
            ts_obj = value;
        } else if (key != str_timeout) {
            /* not interned, or unknown: the Python path sorts it out */
            return forward_send(self, args, nargsf, kwnames);
        }
        if (stream_id < 0 || agent_type < 0) {
            return forward_send(self, args, nargsf, kwnames);
        }
    }
    unsigned long long ts;
    if (ts_obj == Py_None) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now); /* what time.time_ns() reads */
        ts = (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec;
    } else {
        if (!PyLong_Check(ts_obj)) {
            return forward_send(self, args, nargsf, kwnames);
        }
        ts = PyLong_AsUnsignedLongLong(ts_obj);
        if (ts == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return forward_send(self, args, nargsf, kwnames);
        }
    }
    const char *bytes;
    Py_ssize_t n;
    uint16_t flags;
    if (PyBytes_CheckExact(data)) {
        bytes = PyBytes_AS_STRING(data);
        n = PyBytes_GET_SIZE(data);
        flags = FLAG_FIRST;
    } else if (PyUnicode_CheckExact(data)) {
        bytes = PyUnicode_AsUTF8AndSize(data, &n); /* cached on the str; no copy after the first */
        if (bytes == NULL) {
            PyErr_Clear(); /* e.g. lone surrogates: the Python path raises the encoding error */
            return forward_send(self, args, nargsf, kwnames);
        }
        flags = FLAG_FIRST | FLAG_TEXT;
    } else {
        return forward_send(self, args, nargsf, kwnames);
    }
    Py_ssize_t ends[MAX_FRAGMENTS];
    int k = n <= PAYLOAD_SIZE ? (ends[0] = n, 1) : cut_points((const unsigned char *)bytes, n, ends, MAX_FRAGMENTS);
    long long t = self->tail;
    if (k < 0 || t + k > self->limit || guard_is_tripped(self->guard)) {
        return forward_send(self, args, nargsf, kwnames); /* a lost page: Python raises BrokenError */
    }
    long long end = self->base + ((self->mask + 1) << 8);
    if (self->tail_off + 8 > end) end = self->tail_off + 8;
    if (self->lane_off + 8 * (L_HEAD + 1) > end) end = self->lane_off + 8 * (L_HEAD + 1);
    Py_buffer view;
    if (borrow(self->mm, &view, end) < 0) {
        return forward_send(self, args, nargsf, kwnames);
    }
    unsigned char *buf = (unsigned char *)view.buf;
    uint32_t msg_id = (uint32_t)((t - self->extra) & 0xFFFFFFFFll);
    uint32_t sid32 = (uint32_t)stream_id;
    uint64_t ts64 = (uint64_t)ts;
    Py_ssize_t start = 0;
    for (int i = 0; i < k; i++) {
        unsigned char *slot = buf + self->base + (((t + i) & self->mask) << 8);
        uint64_t seq = (uint64_t)(t + i);
        uint32_t len32 = (uint32_t)(ends[i] - start);
        uint16_t f = (uint16_t)((i == 0 ? flags : flags & ~FLAG_FIRST) | (i == k - 1 ? 0 : FLAG_CONTINUES));
        memcpy(slot + 0, &seq, 8);
        memcpy(slot + 8, &len32, 4);
        memcpy(slot + 12, &f, 2);
        slot[14] = (uint8_t)agent_type;
        slot[15] = (uint8_t)self->lane;
        memcpy(slot + 16, &sid32, 4);
        memcpy(slot + 20, &msg_id, 4);
        memcpy(slot + 24, &ts64, 8);
        memcpy(slot + HEADER_SIZE, bytes + start, len32);
        memset(slot + HEADER_SIZE + len32, 0, PAYLOAD_SIZE - len32); /* as struct.pack_into pads */
        start = ends[i];
    }
    t += k;
    self->tail = t;
    /* release: publishes every fragment written above at once */
    __atomic_store_n((uint64_t *)(buf + self->tail_off), (uint64_t)t, __ATOMIC_RELEASE);
    if (k > 1) {
        /* Fragmented: count it, and note the high-water mark as the Python slow path does.
         * Producer-owned statistics words: single writer, no ordering needed. */
        uint64_t *lw = (uint64_t *)(buf + self->lane_off);
        __atomic_store_n(&lw[L_EXTRA_SLOTS], __atomic_load_n(&lw[L_EXTRA_SLOTS], __ATOMIC_RELAXED) + (uint64_t)(k - 1),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&lw[L_FRAGMENTED], __atomic_load_n(&lw[L_FRAGMENTED], __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
        self->extra += k - 1;
        uint64_t occupancy = (uint64_t)t - __atomic_load_n(&lw[L_HEAD], __ATOMIC_ACQUIRE);
        uint64_t capacity = (uint64_t)self->mask + 1;
        if (occupancy > __atomic_load_n(&lw[L_PRODUCER_HWM], __ATOMIC_RELAXED)) {
            __atomic_store_n(&lw[L_PRODUCER_HWM], occupancy < capacity ? occupancy : capacity, __ATOMIC_RELAXED);
        }
    }
    PyBuffer_Release(&view);
    if (guard_is_tripped(self->guard)) {
        /* The segment lost this lane's pages under the mapping (truncated): the stores above
         * went to a private zero page the consumer never sees.  The Python path raises the
         * BrokenError (the message is not sent: returning True would be a lie). */
        self->limit = -1;
        return forward_send(self, args, nargsf, kwnames);
    }
    Py_RETURN_TRUE;
}

static PyObject *Writer_bind(Writer *self, PyObject *py_send) {
    if (!PyCallable_Check(py_send)) {
        PyErr_SetString(PyExc_TypeError, "bind(py_send): expected a callable");
        return NULL;
    }
    Py_XSETREF(self->py_send, Py_NewRef(py_send));
    Py_RETURN_NONE;
}

static PyMethodDef Writer_methods[] = {
    {"send", (PyCFunction)(void (*)(void))Writer_send, METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("send($self, data, *, stream_id=0, agent_type=2, timestamp_ns=None, timeout=None)\n"
               "--\n\n"
               "Send one message; fragments it when it is longer than one slot's 224-byte payload.\n\n"
               "A str is sent as UTF-8 and flagged as text. Returns True when published, False when the\n"
               "'reject' policy refused it (lane full; counted). Blocks only under 'block', up to timeout\n"
               "seconds. agent_type is an AgentType (2 is ASSISTANT); timestamp_ns defaults to time.time_ns(). Raises UsageError for a bad argument,\n"
               "Timeout, BrokenError (consumer gone, or the segment lost pages) and ClosedError. The plain case runs in C; every\n"
               "other case in the equivalent pure-Python implementation.")},
    {"bind", (PyCFunction)Writer_bind, METH_O, PyDoc_STR("Set the pure-Python send that handles every other case.")},
    {NULL},
};

static PyMemberDef Writer_members[] = {
    {"tail", T_LONGLONG, offsetof(Writer, tail), 0, "Slots published."},
    {"limit", T_LONGLONG, offsetof(Writer, limit), 0, "Cached head + capacity; -1 sends everything to Python."},
    {"extra", T_LONGLONG, offsetof(Writer, extra), 0, "Extra slots taken by fragmented messages so far."},
    {"guard", T_LONGLONG, offsetof(Writer, guard), 0, "The mapping's fault-guard token (-1: unguarded)."},
    {NULL},
};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "flowplex.transport._fastring.Writer",
    .tp_doc = PyDoc_STR("Writer(mm, base, tail_off, mask, lane): one producer lane's hot state and send()."),
    .tp_basicsize = sizeof(Writer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Writer_init,
    .tp_dealloc = (destructor)Writer_dealloc,
    .tp_traverse = (traverseproc)Writer_traverse,
    .tp_clear = (inquiry)Writer_clear,
    .tp_methods = Writer_methods,
    .tp_members = Writer_members,
};

/* ---------------------------------------------------------------------------------------- */
/* Reader: the consumer's current lane and recv().                                           */

typedef struct {
    PyObject_HEAD
    PyObject *mm;       /* the mmap of the ring segment */
    PyObject *py_recv;  /* the pure-Python recv, called for everything but the plain case */
    PyTypeObject *message; /* the Message named tuple */
    PyObject *agents;   /* tuple of the eight AgentType members */
    PyObject *cur;      /* the current Lane */
    long long mask;
    int solo;           /* only one producer: re-read its tail inline */
} Reader;

static int Reader_traverse(Reader *self, visitproc visit, void *arg) {
    Py_VISIT(self->mm);
    Py_VISIT(self->py_recv);
    Py_VISIT(self->message);
    Py_VISIT(self->agents);
    Py_VISIT(self->cur);
    return 0;
}

static int Reader_clear(Reader *self) {
    Py_CLEAR(self->mm);
    Py_CLEAR(self->py_recv);
    Py_CLEAR(self->message);
    Py_CLEAR(self->agents);
    Py_CLEAR(self->cur);
    return 0;
}

static void Reader_dealloc(Reader *self) {
    PyObject_GC_UnTrack(self);
    Reader_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Reader_init(Reader *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"mm", "mask", "message", "agents", "lane", NULL};
    PyObject *mm, *message, *agents, *lane;
    long long mask;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLO!O!O!", kwlist, &mm, &mask, &PyType_Type, &message,
                                     &PyTuple_Type, &agents, &LaneType, &lane)) {
        return -1;
    }
    if (PyTuple_GET_SIZE(agents) != 8 || !PyType_IsSubtype((PyTypeObject *)message, &PyTuple_Type) ||
        ((PyTypeObject *)message)->tp_basicsize != PyTuple_Type.tp_basicsize) {
        PyErr_SetString(PyExc_ValueError, "Reader: expected 8 agent types and a plain tuple subclass for messages");
        return -1;
    }
    Py_XSETREF(self->mm, Py_NewRef(mm));
    Py_XSETREF(self->message, (PyTypeObject *)Py_NewRef(message));
    Py_XSETREF(self->agents, Py_NewRef(agents));
    Py_XSETREF(self->cur, Py_NewRef(lane));
    self->mask = mask;
    self->solo = 0;
    return 0;
}

static PyObject *forward_recv(Reader *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (self->py_recv == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "recv: the consumer has no Python path (not initialised)");
        return NULL;
    }
    return PyObject_Vectorcall(self->py_recv, args, nargsf, kwnames);
}

static PyObject *Reader_recv(Reader *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    size_t nargsf = (size_t)nargs;
    Lane *lane = (Lane *)self->cur;
    if (lane == NULL || nargs > 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0 &&
                                      (nargs + PyTuple_GET_SIZE(kwnames) > 1 ||
                                       PyTuple_GET_ITEM(kwnames, 0) != str_timeout))) {
        return forward_recv(self, args, nargsf, kwnames);
    }
    long long h = lane->head;
    long long mask = self->mask;
    long long end = lane->base + ((mask + 1) << 8);
    long long words_end = 8 * (lane->words + L_REASSEMBLED) + 8;
    if (8 * lane->tail_i + 8 > end) end = 8 * lane->tail_i + 8;
    if (8 * lane->head_i + 8 > end) end = 8 * lane->head_i + 8;
    if (words_end > end) end = words_end;
    Py_buffer view;
    if (borrow(self->mm, &view, end) < 0) {
        return forward_recv(self, args, nargsf, kwnames);
    }
    uint64_t *words = (uint64_t *)view.buf;
    if (h >= lane->avail && self->solo) {
        /* One producer: re-read its tail right here (no fairness to keep). acquire */
        uint64_t tail = __atomic_load_n(&words[lane->tail_i], __ATOMIC_ACQUIRE);
        if (tail <= MAX_POSITION) lane->avail = (long long)tail; /* else Python's scan reports it */
    }
    /* A tail more than a lane ahead of head (or "negative": above 2**63) is no tail a producer
     * writes under reject or block (the only policies that read here): the Python path reports it. */
    long long avail = lane->avail;
    if (avail <= h || (unsigned long long)(avail - h) > (unsigned long long)mask + 1) {
        PyBuffer_Release(&view);
        return forward_recv(self, args, nargsf, kwnames);
    }
    /* Pass 1: validate the slots of the message at head and size it.  Every header field is read
     * from shared memory exactly once, into a local that is validated and then the only copy
     * used: another process may rewrite the slot at any moment (a hostile one, or a corrupt
     * segment), and a second read could see a length or agent type that was never checked. */
    const unsigned char *lanebuf = (const unsigned char *)view.buf + lane->base;
    uint32_t lens[MAX_FRAGMENTS];
    uint64_t seq = 0, ts = 0;
    uint32_t sid = 0, mid = 0;
    uint16_t flags = 0;
    uint8_t agent = 0;
    long long pos = h;
    Py_ssize_t total = 0;
    for (;;) {
        const unsigned char *slot = lanebuf + ((pos & mask) << 8);
        unsigned char hdr[HEADER_SIZE];
        memcpy(hdr, slot, HEADER_SIZE); /* the one read of this header */
        __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the compiler may not re-read the slot for hdr */
        uint64_t s;
        uint32_t n;
        uint16_t f;
        memcpy(&s, hdr + 0, 8);
        memcpy(&n, hdr + 8, 4);
        memcpy(&f, hdr + 12, 2);
        if (pos >= avail || pos - h >= MAX_FRAGMENTS || s != (uint64_t)pos || n > PAYLOAD_SIZE || hdr[14] > 7 ||
            ((f & FLAG_FIRST) != 0) != (pos == h)) {
            /* nothing published, a very long message, or a slot that breaks the protocol: the
             * Python path waits, reassembles or reports */
            PyBuffer_Release(&view);
            return forward_recv(self, args, nargsf, kwnames);
        }
        if (pos == h) {
            seq = s;
            flags = f;
            agent = hdr[14];
            memcpy(&sid, hdr + 16, 4);
            memcpy(&mid, hdr + 20, 4);
            memcpy(&ts, hdr + 24, 8);
        }
        lens[pos - h] = n;
        total += n;
        pos++;
        if (!(f & FLAG_CONTINUES)) break;
    }
    /* Pass 2: copy the payload(s), each of the length validated in pass 1; the slots stay ours
     * until head is released below (a hostile writer can only change which bytes we copy). */
    PyObject *data = PyBytes_FromStringAndSize(NULL, total);
    if (data == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    char *out = PyBytes_AS_STRING(data);
    for (long long p = h; p < pos; p++) {
        memcpy(out, lanebuf + ((p & mask) << 8) + HEADER_SIZE, lens[p - h]);
        out += lens[p - h];
    }
    if (pos - h > 1) { /* consumer-owned statistics words: single writer, no ordering needed */
        uint64_t *extra = &words[lane->words + L_CONSUMER_EXTRA], *joined = &words[lane->words + L_REASSEMBLED];
        __atomic_store_n(extra, __atomic_load_n(extra, __ATOMIC_RELAXED) + (uint64_t)(pos - h - 1), __ATOMIC_RELAXED);
        __atomic_store_n(joined, __atomic_load_n(joined, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    }
    lane->next_msg = (long long)(((uint64_t)mid + 1) & 0xFFFFFFFFull);
    lane->head = pos;
    /* release: frees the slots after they were read */
    __atomic_store_n(&words[lane->head_i], (uint64_t)pos, __ATOMIC_RELEASE);
    PyBuffer_Release(&view);
    PyObject *items[7] = {
        data,
        PyLong_FromUnsignedLongLong(seq),
        PyLong_FromUnsignedLong(sid),
        Py_NewRef(PyTuple_GET_ITEM(self->agents, agent)),
        PyLong_FromUnsignedLongLong(ts),
        PyLong_FromLongLong(lane->index),
        PyLong_FromLong(flags),
    };
    PyObject *msg = self->message->tp_alloc(self->message, 7);
    int ok = msg != NULL;
    for (int i = 0; i < 7; i++) {
        if (items[i] == NULL) ok = 0;
    }
    if (!ok) {
        Py_XDECREF(msg);
        for (int i = 0; i < 7; i++) Py_XDECREF(items[i]);
        return NULL;
    }
    for (int i = 0; i < 7; i++) {
        PyTuple_SET_ITEM(msg, i, items[i]);
    }
    return msg;
}

static PyObject *Reader_bind(Reader *self, PyObject *py_recv) {
    if (!PyCallable_Check(py_recv)) {
        PyErr_SetString(PyExc_TypeError, "bind(py_recv): expected a callable");
        return NULL;
    }
    Py_XSETREF(self->py_recv, Py_NewRef(py_recv));
    Py_RETURN_NONE;
}

static PyObject *Reader_get_cur(Reader *self, void *closure) {
    return Py_NewRef(self->cur);
}

static int Reader_set_cur(Reader *self, PyObject *value, void *closure) {
    if (value == NULL || !PyObject_TypeCheck(value, &LaneType)) {
        PyErr_SetString(PyExc_TypeError, "Reader.cur: expected a Lane");
        return -1;
    }
    Py_XSETREF(self->cur, Py_NewRef(value));
    return 0;
}

static PyObject *Reader_get_solo(Reader *self, void *closure) {
    return PyBool_FromLong(self->solo);
}

static int Reader_set_solo(Reader *self, PyObject *value, void *closure) {
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "Reader.solo cannot be deleted");
        return -1;
    }
    int truth = PyObject_IsTrue(value);
    if (truth < 0) {
        return -1;
    }
    self->solo = truth;
    return 0;
}

static PyGetSetDef Reader_getset[] = {
    {"cur", (getter)Reader_get_cur, (setter)Reader_set_cur, "The lane recv reads first.", NULL},
    {"solo", (getter)Reader_get_solo, (setter)Reader_set_solo, "Whether only one producer is registered.", NULL},
    {NULL},
};

static PyMethodDef Reader_methods[] = {
    {"recv", (PyCFunction)(void (*)(void))Reader_recv, METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("recv($self, timeout=None)\n"
               "--\n\n"
               "Receive the next message from any producer; waits up to timeout seconds (None: no limit).\n\n"
               "Per producer, messages come in the order they were sent. Raises Timeout, EndOfStream\n"
               "(every producer closed and all was read), BrokenError (a producer died) and ClosedError.\n"
               "A published message in the current lane is read in C; every other case in Python.")},
    {"bind", (PyCFunction)Reader_bind, METH_O, PyDoc_STR("Set the pure-Python recv that handles every other case.")},
    {NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "flowplex.transport._fastring.Reader",
    .tp_doc = PyDoc_STR("Reader(mm, mask, message, agents, lane): the consumer's current lane and recv()."),
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_traverse = (traverseproc)Reader_traverse,
    .tp_clear = (inquiry)Reader_clear,
    .tp_methods = Reader_methods,
    .tp_getset = Reader_getset,
};


/* ---------------------------------------------------------------------------------------- */
/* The fault guard: a shrunk segment becomes a BrokenError, never a SIGBUS.                  */
/*
 * Another process (of the same user: attach refuses other users' segments) can truncate a
 * segment under our mapping; touching a page past the new end of the file then raises SIGBUS,
 * which kills the process.  No check before an access can close that race, so the guard
 * handles the fault: a SIGBUS whose address lies in a registered mapping gets that page
 * replaced by a private zero page (the faulting access is then retried and succeeds), and the
 * mapping is marked "tripped"; the ring's slow paths see the mark and raise BrokenError, and so
 * does a send whose own stores faulted (the producer checks the mark after each write).  Zero
 * pages read as "nothing published" or as slots that break the protocol, never as messages.
 * A tmpfs that runs out of space also raises SIGBUS on a first touch, and is handled the same.
 * Faults outside the registered mappings go to the handler that was installed before (for
 * instance faulthandler's) or to the default action, exactly as without the guard.  The pure-
 * Python hot paths are guarded too: the guard is installed whenever this module is built.
 */

#define MAX_GUARDED 1024

typedef struct {
    uintptr_t start; /* 0: a free entry */
    uintptr_t end;
    int tripped;
} Guarded;

static Guarded guarded[MAX_GUARDED];
static struct sigaction previous_bus;
static int guard_installed = 0;
static uintptr_t page_size = 4096;

static void on_sigbus(int sig, siginfo_t *info, void *ctx) {
    if (info != NULL && info->si_code > 0) { /* raised by the kernel for a fault, not by kill() */
        uintptr_t at = (uintptr_t)info->si_addr;
        for (int i = 0; i < MAX_GUARDED; i++) {
            uintptr_t start = __atomic_load_n(&guarded[i].start, __ATOMIC_ACQUIRE);
            if (start != 0 && start <= at && at < __atomic_load_n(&guarded[i].end, __ATOMIC_RELAXED)) {
                void *page = (void *)(at & ~(page_size - 1));
                if (mmap(page, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
                    MAP_FAILED) {
                    __atomic_store_n(&guarded[i].tripped, 1, __ATOMIC_RELEASE);
                    return; /* the access is retried on the zero page */
                }
                break;
            }
        }
    }
    if (previous_bus.sa_flags & SA_SIGINFO) {
        previous_bus.sa_sigaction(sig, info, ctx);
    } else if (previous_bus.sa_handler != SIG_DFL && previous_bus.sa_handler != SIG_IGN) {
        previous_bus.sa_handler(sig);
    } else {
        /* Not ours, and nobody else's: let the retried fault take the default action. */
        signal(SIGBUS, SIG_DFL);
    }
}

static int install_guard(void) {
    if (guard_installed) {
        /* Someone may have installed a SIGBUS handler of their own since (faulthandler, a
         * library): put ours back in front of it, chaining to it, rather than stay bypassed. */
        struct sigaction current;
        if (sigaction(SIGBUS, NULL, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
            current.sa_sigaction == on_sigbus) {
            return 0;
        }
    }
    long ps = sysconf(_SC_PAGESIZE);
    if (ps > 0) page_size = (uintptr_t)ps;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &previous_bus) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    guard_installed = 1;
    return 0;
}

static PyObject *guard_register(PyObject *module, PyObject *mm) {
    Py_buffer view;
    if (PyObject_GetBuffer(mm, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    uintptr_t start = (uintptr_t)view.buf, end = start + (uintptr_t)view.len;
    PyBuffer_Release(&view); /* the address stays valid until the mapping is closed */
    if (install_guard() < 0) {
        return NULL;
    }
    for (int i = 0; i < MAX_GUARDED; i++) {
        if (guarded[i].start == 0) {
            guarded[i].tripped = 0;
            __atomic_store_n(&guarded[i].end, end, __ATOMIC_RELAXED);
            __atomic_store_n(&guarded[i].start, start, __ATOMIC_RELEASE);
            return PyLong_FromLong(i);
        }
    }
    return PyLong_FromLong(-1); /* table full: this mapping goes unguarded */
}

static int guard_slot(PyObject *token) {
    long i = PyLong_AsLong(token);
    if (i == -1 && PyErr_Occurred()) return -2;
    return i >= 0 && i < MAX_GUARDED ? (int)i : -1;
}

static PyObject *guard_unregister(PyObject *module, PyObject *token) {
    int i = guard_slot(token);
    if (i == -2) return NULL;
    if (i >= 0) {
        __atomic_store_n(&guarded[i].start, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&guarded[i].end, 0, __ATOMIC_RELAXED);
    }
    Py_RETURN_NONE;
}

static int guard_is_tripped(long long token) {
    return token >= 0 && token < MAX_GUARDED && __atomic_load_n(&guarded[token].tripped, __ATOMIC_ACQUIRE);
}

static PyObject *guard_tripped(PyObject *module, PyObject *token) {
    int i = guard_slot(token);
    if (i == -2) return NULL;
    return PyBool_FromLong(i >= 0 && __atomic_load_n(&guarded[i].tripped, __ATOMIC_ACQUIRE));
}

static PyMethodDef module_methods[] = {
    {"guard_register", (PyCFunction)guard_register, METH_O,
     PyDoc_STR("guard_register(mm, /)\n--\n\nGuard a mapping against SIGBUS; return its token (-1: not guarded).")},
    {"guard_unregister", (PyCFunction)guard_unregister, METH_O,
     PyDoc_STR("guard_unregister(token, /)\n--\n\nStop guarding (call before the mapping is closed).")},
    {"guard_tripped", (PyCFunction)guard_tripped, METH_O,
     PyDoc_STR("guard_tripped(token, /)\n--\n\nWhether a fault in the mapping was absorbed (it lost pages).")},
    {NULL},
};

/* ---------------------------------------------------------------------------------------- */

static struct PyModuleDef fastring_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "flowplex.transport._fastring",
    .m_doc = PyDoc_STR("C hot paths of the ring transport (optional; the pure-Python path is equivalent)."),
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__fastring(void) {
    if (PyType_Ready(&LaneType) < 0 || PyType_Ready(&WriterType) < 0 || PyType_Ready(&ReaderType) < 0) {
        return NULL;
    }
    str_stream_id = PyUnicode_InternFromString("stream_id");
    str_agent_type = PyUnicode_InternFromString("agent_type");
    str_timestamp_ns = PyUnicode_InternFromString("timestamp_ns");
    str_timeout = PyUnicode_InternFromString("timeout");
    if (!str_stream_id || !str_agent_type || !str_timestamp_ns || !str_timeout) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&fastring_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "SLOT_SIZE", SLOT_SIZE) < 0 ||
        PyModule_AddIntConstant(m, "PAYLOAD_SIZE", PAYLOAD_SIZE) < 0 ||
        PyModule_AddIntConstant(m, "MAX_ESCAPE", MAX_ESCAPE) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_CONTINUES", FLAG_CONTINUES) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_FIRST", FLAG_FIRST) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_TEXT", FLAG_TEXT) < 0 ||
        PyModule_AddIntConstant(m, "L_EXTRA_SLOTS", L_EXTRA_SLOTS) < 0 ||
        PyModule_AddIntConstant(m, "L_FRAGMENTED", L_FRAGMENTED) < 0 ||
        PyModule_AddIntConstant(m, "L_PRODUCER_HWM", L_PRODUCER_HWM) < 0 ||
        PyModule_AddIntConstant(m, "L_HEAD", L_HEAD) < 0 ||
        PyModule_AddIntConstant(m, "L_CONSUMER_EXTRA", L_CONSUMER_EXTRA) < 0 ||
        PyModule_AddIntConstant(m, "L_REASSEMBLED", L_REASSEMBLED) < 0 ||
        PyModule_AddObjectRef(m, "Lane", (PyObject *)&LaneType) < 0 ||
        PyModule_AddObjectRef(m, "Writer", (PyObject *)&WriterType) < 0 ||
        PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

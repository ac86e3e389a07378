"""CUDA C source of the GPU formatter (compiled at run time by NVRTC through CuPy).

Self-contained (no headers, Perdix G7) and a line-by-line port of ``format_ansi`` and
``cut_points``, so that the GPU writes the same bytes as the CPU.  Two kernels:

``fpx_format``
    one thread per message: formats it into a device scratch area and counts the slots its
    fragments need (the same cut rules as ``_fragment.cut_points``).
``fpx_publish``
    one thread per message: cuts the formatted bytes again and writes each fragment into its
    slot of the ring, which lives in page-locked, device-mapped host memory.  The CPU reserved
    the slot range before the launch and passes its base, so the GPU needs no atomics on host
    memory (Perdix R7).  Stores are 16-byte aligned vectors (the payload is at offset 32,
    Perdix G1); ``seq`` is written last, after ``__threadfence_system()`` (G4).  The CPU
    publishes the lane's ``tail`` only after the stream has synchronised.
"""

from __future__ import annotations

from typing import Final

SOURCE: Final = r"""
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define SLOT_SIZE 256
#define HEADER_SIZE 32
#define PAYLOAD 224
#define MAX_ESCAPE 64
#define FLAG_CONTINUES 1u
#define FLAG_FIRST 2u
#define FLAG_TEXT 8u

__constant__ u8 COLOUR_DIGITS[8][2] = {
    {'3','4'}, {'3','2'}, {'3','6'}, {'3','1'}, {'3','3'}, {'3','7'}, {'3','5'}, {'9','0'}};
__constant__ char LABELS[8][13] = {
    "[SYSTEM] ", "[USER] ", "[ASSISTANT] ", "[ERROR] ",
    "[WARNING] ", "[INFO] ", "[DEBUG] ", "[TRACE] "};
__constant__ u8 LABEL_LEN[8] = {9, 7, 12, 8, 10, 7, 8, 8};

__device__ __forceinline__ bool is_word(u8 c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

__device__ __forceinline__ bool starts_with(const u8* s, u32 n, u32 i, const char* w, u32 wn) {
    if (i + wn > n) return false;
    for (u32 k = 0; k < wn; ++k) if (s[i + k] != (u8)w[k]) return false;
    return true;
}

/* Writes (or, with out == 0, only counts) the formatted message; returns its length. */
__device__ u32 format_one(const u8* src, u32 n, u32 agent, bool ansi, u8* out) {
    u32 o = 0;
    #define PUT(c) do { if (out) out[o] = (u8)(c); ++o; } while (0)
    if (!ansi) {
        for (u32 i = 0; i < n; ++i) PUT(src[i]);
        return o;
    }
    PUT(0x1b); PUT('['); PUT(COLOUR_DIGITS[agent][0]); PUT(COLOUR_DIGITS[agent][1]); PUT('m');
    for (u32 k = 0; k < LABEL_LEN[agent]; ++k) PUT(LABELS[agent][k]);
    PUT(0x1b); PUT('['); PUT('0'); PUT('m');
    u32 i = 0;
    while (i < n) {
        u32 wn = 0; char digit = 0; const char* word = 0;
        if (i == 0 || !is_word(src[i - 1])) {
            if (starts_with(src, n, i, "ERROR", 5)) { word = "ERROR"; wn = 5; digit = '1'; }
            else if (starts_with(src, n, i, "WARNING", 7)) { word = "WARNING"; wn = 7; digit = '3'; }
            else if (starts_with(src, n, i, "SUCCESS", 7)) { word = "SUCCESS"; wn = 7; digit = '2'; }
            if (wn && i + wn < n && is_word(src[i + wn])) wn = 0;
        }
        if (wn) {
            PUT(0x1b); PUT('['); PUT('9'); PUT(digit); PUT('m');
            for (u32 k = 0; k < wn; ++k) PUT(word[k]);
            PUT(0x1b); PUT('['); PUT('0'); PUT('m');
            i += wn;
        } else {
            PUT(src[i]);
            ++i;
        }
    }
    PUT(0x1b); PUT('['); PUT('0'); PUT('m');
    #undef PUT
    return o;
}

/* _fragment._escape_closed: does the escape sequence at data[start] end at or before stop? */
__device__ bool escape_closed(const u8* d, u32 start, u32 stop) {
    u32 i = start + 1;
    if (i >= stop) return false;
    u8 kind = d[i];
    if (kind == 0x5B) {
        for (u32 j = i + 1; j < stop; ++j) if (d[j] >= 0x40 && d[j] <= 0x7E) return true;
        return false;
    }
    if (kind == 0x5D || kind == 0x50 || kind == 0x5F || kind == 0x5E) {
        for (u32 j = i + 1; j < stop; ++j) {
            if (d[j] == 0x07) return true;
            if (d[j] == 0x1b && j + 1 < stop && d[j + 1] == 0x5C) return true;
        }
        return false;
    }
    while (kind >= 0x20 && kind <= 0x2F) {
        ++i;
        if (i >= stop) return false;
        kind = d[i];
    }
    return true;
}

/* _fragment.cut_points: end offset of the fragment that starts at pos. */
__device__ u32 next_cut(const u8* d, u32 n, u32 pos) {
    if (n - pos <= PAYLOAD) return n;
    u32 end = pos + PAYLOAD;
    u32 back = end;
    while (back > end - 3 && back > pos + 1 && (d[back] & 0xC0) == 0x80) --back;
    if ((d[back] & 0xC0) != 0x80) end = back;
    u32 lo = (end >= MAX_ESCAPE && end - MAX_ESCAPE > pos + 1) ? end - MAX_ESCAPE : pos + 1;
    for (u32 e = end; e > lo; --e) {
        if (d[e - 1] == 0x1b) {
            if (!escape_closed(d, e - 1, end)) end = e - 1;
            break;
        }
    }
    return end;
}

extern "C" __global__ void fpx_format(
    const u8* text, const u64* text_off, const u32* text_len, const u8* agent, u32 n_msgs,
    int ansi, u8* scratch, const u64* scratch_off, u32* out_len, u32* out_slots)
{
    u32 m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= n_msgs) return;
    u8* out = scratch + scratch_off[m];
    u32 len = format_one(text + text_off[m], text_len[m], agent[m], ansi != 0, out);
    out_len[m] = len;
    u32 slots = 0, pos = 0;
    do { pos = next_cut(out, len, pos); ++slots; } while (pos < len);
    out_slots[m] = slots;
}

extern "C" __global__ void fpx_publish(
    const u8* scratch, const u64* scratch_off, const u32* out_len, const u64* slot_start,
    const u8* agent, const u32* stream_id, const u64* timestamp, u32 n_msgs,
    u8* slots, u64 mask, u64 base_seq, u32 base_msg, u32 lane, u32 text_flag)
{
    u32 m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= n_msgs) return;
    const u8* d = scratch + scratch_off[m];
    u32 len = out_len[m];
    u64 seq = base_seq + slot_start[m];
    u32 pos = 0;
    bool first = true;
    __align__(16) u8 buf[SLOT_SIZE];
    do {
        u32 end = next_cut(d, len, pos);
        u32 flags = text_flag | (first ? FLAG_FIRST : 0u) | (end < len ? FLAG_CONTINUES : 0u);
        for (u32 k = 0; k < SLOT_SIZE; ++k) buf[k] = 0;
        u32 flen = end - pos;
        *(u32*)(buf + 8) = flen;
        *(u16*)(buf + 12) = (u16)flags;
        buf[14] = agent[m];
        buf[15] = (u8)lane;
        *(u32*)(buf + 16) = stream_id[m];
        *(u32*)(buf + 20) = base_msg + m;
        *(u64*)(buf + 24) = timestamp[m];
        for (u32 k = 0; k < flen; ++k) buf[HEADER_SIZE + k] = d[pos + k];
        u8* slot = slots + ((seq & mask) * SLOT_SIZE);
        /* bytes 8..15 as one 8-byte store, 16..255 as 16-byte stores (all aligned), seq last */
        *(u64*)(slot + 8) = *(const u64*)(buf + 8);
        for (u32 k = 16; k < SLOT_SIZE; k += 16) *(uint4*)(slot + k) = *(const uint4*)(buf + k);
        __threadfence_system();
        *(volatile u64*)slot = seq;
        ++seq;
        pos = end;
        first = false;
    } while (pos < len);
}
"""

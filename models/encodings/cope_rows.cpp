// CoPE's elementwise chain over the rows of one tile, fused (issue 67): models/encodings/cope.py does the tile's
// matrix products and calls these through ctypes. A tile is G slices x R query rows (query i = r0 + the row's
// index within its slice) over keys 0..n-1; row-major buffers of G R rows:
//   S      (rows, n)      the scaled scores s q_i . k_j on entry
//   table  (rows, tcols)  T_i[c] = s q_i . E[c] for c < tcols (the positions the tile reaches and one more)
// Every function works on keys j <= i of each row and writes 0 to the future keys j > i that a matrix product
// after it reads. The definitions are the module docstring's of cope.py (p_ij the suffix sum of the gates,
// lo = floor(p), w = p - lo, D = T[lo + 1] - T[lo], z = T[lo] + w D), and so is the exp floor.
//
// Built once per machine by models/native.py with -O3 -mavx2 -mfma -ffp-contract=off (CoPE takes this route only on
// a CPU with AVX2, which all three kinds the suite meets have): fp32 exponentials run 8 at a time (`exp8`, Cephes'
// expf polynomial); the fp64 instantiation, for the tests, calls libm's exp. A multiply and add are fused only where
// the source says so (std::fma, _mm256_fmadd_ps), not where a compiler chooses to: the rounding is this file's on
// every machine and compiler.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace {

// e^x for 8 floats, x clamped to [-87, 88] so every result is a normal float: x = n ln2 + r with |r| <= ln2 / 2,
// e^r by Cephes' degree-6 polynomial (relative error about 1e-7), 2^n written into the exponent bits.
inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);  // ln2 in two parts: exact n ln2_hi
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
}

inline float exp1(float x) {  // the same function for one value (a row's tail)
    alignas(32) float lanes[8] = {x};
    _mm256_store_ps(lanes, exp8(_mm256_load_ps(lanes)));
    return lanes[0];
}

inline double exp1(double x) { return std::exp(x); }

// gates[j] = sigmoid(S[j]) for j < m; returns their sum (in fp32 lanes: only a bound is made of it). A logit
// below -80 gives a gate of about 1.8e-35 rather than 0 (the exp's clamp): no subnormal is ever formed, and a sum
// of gates moves by less than its rounding.
inline double sigmoid_row(const float* S, float* gates, int64_t m) {
    const __m256 one = _mm256_set1_ps(1.0f), cap = _mm256_set1_ps(80.0f);
    __m256 acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const __m256 e = exp8(_mm256_min_ps(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_loadu_ps(S + j)), cap));
        const __m256 g = _mm256_div_ps(one, _mm256_add_ps(one, e));
        _mm256_storeu_ps(gates + j, g);
        acc = _mm256_add_ps(acc, g);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    double total = 0;
    for (float lane : lanes) total += lane;
    for (; j < m; ++j) total += (gates[j] = 1.0f / (1.0f + exp1(std::fmin(-S[j], 80.0f))));
    return total;
}

inline double sigmoid_row(const double* S, double* gates, int64_t m) {
    double total = 0;
    for (int64_t j = 0; j < m; ++j) total += (gates[j] = 1.0 / (1.0 + std::exp(-S[j])));
    return total;
}

// S[j] = exp(max(S[j] - centre, floor)) for j < m; returns their sum.
inline float exp_row(float* S, int64_t m, float centre, float floor) {
    const __m256 c = _mm256_set1_ps(centre), f = _mm256_set1_ps(floor);
    __m256 acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const __m256 e = exp8(_mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(S + j), c), f));
        _mm256_storeu_ps(S + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    float total = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    for (; j < m; ++j) total += (S[j] = exp1(std::fmax(S[j] - centre, floor)));
    return total;
}

inline double exp_row(double* S, int64_t m, double centre, double floor) {
    double total = 0;
    for (int64_t j = 0; j < m; ++j) total += (S[j] = std::exp(std::fmax(S[j] - centre, floor)));
    return total;
}

struct Tile {
    int64_t rows, R, n, tcols, r0, last;  // last: the largest position (p is clamped there)
    int64_t query(int64_t row) const { return r0 + row % R; }
};

// The contextual positions of one row's keys j <= i from its gates: p_ij = min(sum_{t=j..i} g_it, last), written
// to `p` (which may be the gates themselves), walking from the query down. The sums run in double (as torch's cumsum
// of floats accumulates on the CPU), four keys a step: each of the four adds its partial sum of the step's gates to
// the sum before the step, so the loop-carried chain is one add a step rather than four, and a sum still never
// decreases towards key 0 (the interpolation below relies on that).
template <typename T>
inline void suffix_positions(const T* gates, T* p, int64_t i, int64_t last) {
    const auto put = [&](int64_t j, double sum) { p[j] = sum < double(last) ? T(sum) : T(last); };
    double sum = 0;
    int64_t j = i;
    for (; j >= 3; j -= 4) {
        const double g0 = gates[j], g01 = g0 + double(gates[j - 1]), g2 = gates[j - 2];
        const double g012 = g01 + g2, g0123 = g01 + (g2 + double(gates[j - 3]));
        put(j, sum + g0);
        put(j - 1, sum + g01);
        put(j - 2, sum + g012);
        put(j - 3, sum + g0123);
        sum += g0123;
    }
    for (; j >= 0; --j) put(j, sum += gates[j]);
}

// The same for fp32 gates, four keys a step in AVX2 lanes of doubles, summed in exactly the pairs above (the same
// floats as the scalar walk: tests/test_cope.py): lanes [g(j-3), g(j-2), g(j-1), g(j)] become their suffix sums
// [(a+b)+(c+d), b+(c+d), c+d, d] in two steps, and the running sum, a vector of one value, gains the step's total
// off the positions' path.
inline void suffix_positions(const float* gates, float* p, int64_t i, int64_t last) {
    const __m256d cap = _mm256_set1_pd(double(last)), zero = _mm256_setzero_pd();
    __m256d sum = zero;
    int64_t j = i;
    for (; j >= 3; j -= 4) {
        const __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(gates + j - 3));  // [a b c d], d = g(j)
        // [a+b, ., c+d, d]: x plus x shifted down a lane (lane 3 adds 0)
        const __m256d y = _mm256_add_pd(x, _mm256_blend_pd(_mm256_permute4x64_pd(x, 0xF9), zero, 0x8));
        // [(a+b)+(c+d), b+(c+d), c+d, d]: lanes 0 and 1 add y's lane 2 to y's lane 0 and x's lane 1
        const __m256d z = _mm256_add_pd(_mm256_blend_pd(y, x, 0x2),
                                        _mm256_blend_pd(_mm256_permute4x64_pd(y, 0xAA), zero, 0xC));
        _mm_storeu_ps(p + j - 3, _mm256_cvtpd_ps(_mm256_min_pd(_mm256_add_pd(sum, z), cap)));
        sum = _mm256_add_pd(sum, _mm256_permute4x64_pd(z, 0x00));
    }
    double tail = _mm256_cvtsd_f64(sum);
    for (; j >= 0; --j) {
        tail += gates[j];
        p[j] = tail < double(last) ? float(tail) : float(last);
    }
}

// One key's interpolated position logit: S[j] += T[lo] + w D with lo = floor(p), w = p - lo, D = T[lo + 1] - T[lo];
// returns the new score. The bound by tcols never binds (the caller sizes the table past the largest p) and only
// keeps a read inside the table.
template <typename T>
inline T interpolate_key(int64_t j, T* S, const T* p, const T* table, int64_t tcols, int32_t* lo, T* w, T* D) {
    const int32_t l = std::min(static_cast<int32_t>(p[j]), static_cast<int32_t>(tcols - 2));
    const T frac = p[j] - T(l), below = table[l], diff = table[l + 1] - below;
    const T score = std::fma(frac, diff, S[j] + below);
    S[j] = score;
    if (lo != nullptr) lo[j] = l, w[j] = frac, D[j] = diff;
    return score;
}

// The interpolated position logits of keys j < m (interpolate_key for each; w may be p itself); returns the row's
// largest score. Eight keys at a time: their positions fall by at most 7 (gates are at most 1) from the first to the
// last, so their floors span at most 9 table entries past the last key's, T[lo] and T[lo + 1] come from two loads of
// 8 there and two permutes each, no gather (AVX2's gathers are slow on the EPYC: 1.6x slower than scalar loads).
// A block near the table's end, or one whose floors span more (not expected), takes the scalar path.
inline float interpolate_row(float* S, const float* p, const float* table, int64_t m, int64_t tcols, int32_t* lo,
                             float* w, float* D) {
    const __m256i top = _mm256_set1_epi32(static_cast<int32_t>(tcols - 2)), seven = _mm256_set1_epi32(7);
    const __m256i one = _mm256_set1_epi32(1), eight = _mm256_set1_epi32(8), none = _mm256_set1_epi32(-1);
    __m256 best = _mm256_set1_ps(-INFINITY);
    float most = -INFINITY;
    int64_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const __m256 pc = _mm256_loadu_ps(p + j);
        const __m256i l = _mm256_min_epi32(_mm256_cvttps_epi32(pc), top);  // floor: p >= 0
        const int32_t base = _mm256_extract_epi32(l, 7);  // the block's smallest floor (p falls with j)
        const __m256i at = _mm256_sub_epi32(l, _mm256_set1_epi32(base));
        const __m256i outside = _mm256_or_si256(_mm256_cmpgt_epi32(at, eight), _mm256_cmpgt_epi32(at, none) ^ none);
        if (base + 16 > tcols || !_mm256_testz_si256(outside, outside)) {
            for (int64_t k = j; k < j + 8; ++k) most = std::fmax(most, interpolate_key(k, S, p, table, tcols, lo, w, D));
            continue;
        }
        const __m256 first = _mm256_loadu_ps(table + base), second = _mm256_loadu_ps(table + base + 8);
        const __m256i next = _mm256_add_epi32(at, one);
        const __m256 below = _mm256_blendv_ps(_mm256_permutevar8x32_ps(first, at), _mm256_permutevar8x32_ps(second, at),
                                              _mm256_castsi256_ps(_mm256_cmpgt_epi32(at, seven)));
        const __m256 above = _mm256_blendv_ps(_mm256_permutevar8x32_ps(first, next),
                                              _mm256_permutevar8x32_ps(second, next),
                                              _mm256_castsi256_ps(_mm256_cmpgt_epi32(next, seven)));
        const __m256 frac = _mm256_sub_ps(pc, _mm256_cvtepi32_ps(l)), diff = _mm256_sub_ps(above, below);
        const __m256 score = _mm256_fmadd_ps(frac, diff, _mm256_add_ps(_mm256_loadu_ps(S + j), below));
        _mm256_storeu_ps(S + j, score);
        best = _mm256_max_ps(best, score);
        if (lo != nullptr) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + j), l);
            _mm256_storeu_ps(w + j, frac);
            _mm256_storeu_ps(D + j, diff);
        }
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, best);
    for (float lane : lanes) most = std::fmax(most, lane);
    for (; j < m; ++j) most = std::fmax(most, interpolate_key(j, S, p, table, tcols, lo, w, D));
    return most;
}

inline double interpolate_row(double* S, const double* p, const double* table, int64_t m, int64_t tcols,
                              int32_t* lo, double* w, double* D) {
    double most = -INFINITY;
    for (int64_t j = 0; j < m; ++j) most = std::fmax(most, interpolate_key(j, S, p, table, tcols, lo, w, D));
    return most;
}

// The gates sigmoid(S) of every row's keys j <= i (0 in the future); returns the largest row total, from which
// the caller bounds the positions a tile reaches (p_ij <= the total of row i) and so its table's columns.
template <typename T>
double gates_rows(const Tile& t, const T* S, T* gates) {
    double most = 0;
    for (int64_t row = 0; row < t.rows; ++row) {
        const int64_t i = t.query(row), m = i + 1;
        T* g = gates + row * t.n;
        const double total = sigmoid_row(S + row * t.n, g, m);
        most = total > most ? total : most;
        for (int64_t j = m; j < t.n; ++j) g[j] = 0;
    }
    return most;
}

// Forward: S becomes the unnormalised weights exp(score - rowmax) (0 in the future); rowmax and rowsum per row.
// The gates become the positions.
template <typename T>
void forward_rows(const Tile& t, T* S, T* gates, const T* table, T* rowmax, T* rowsum, T floor) {
    for (int64_t row = 0; row < t.rows; ++row) {
        const int64_t i = t.query(row), m = i + 1;
        T *s = S + row * t.n, *p = gates + row * t.n;
        suffix_positions(p, p, i, t.last);
        const T best = interpolate_row(s, p, table + row * t.tcols, m, t.tcols, nullptr, nullptr, nullptr);
        rowsum[row] = exp_row(s, m, best, floor);
        rowmax[row] = best;
        for (int64_t j = m; j < t.n; ++j) s[j] = 0;
    }
}

// Backward, first half: the forward pass again (slopes holding the gates on entry), S becoming the attention
// weights exp(score - lse) and slopes the gates' derivative g (1 - g); lo, w and D kept for the second half (all 0
// in the future).
template <typename T>
void recompute_rows(const Tile& t, T* S, T* slopes, int32_t* lo, T* w, T* D, const T* table, const T* lse, T floor) {
    for (int64_t row = 0; row < t.rows; ++row) {
        const int64_t i = t.query(row), m = i + 1, at = row * t.n;
        T *s = S + at, *g = slopes + at, *p = w + at;
        suffix_positions(g, p, i, t.last);
        interpolate_row(s, p, table + row * t.tcols, m, t.tcols, lo + at, p, D + at);  // w in place of p
        for (int64_t j = 0; j < m; ++j) g[j] -= g[j] * g[j];
        exp_row(s, m, lse[row], floor);
        for (int64_t j = m; j < t.n; ++j) s[j] = g[j] = w[j] = D[j] = 0, lo[j] = 0;
    }
}

// The running sum dg plus the prefix sums of four values, in the scalar walk's pairs ([x0, x0+x1, (x0+x1)+x2,
// (x0+x1)+(x2+x3)], in double), as floats; dg gains the four's total.
inline __m128 running_prefix4(__m128 values, __m256d& dg) {
    const __m256d zero = _mm256_setzero_pd(), x = _mm256_cvtps_pd(values);
    // [x0, x0+x1, x1+x2, x2+x3]: x plus x shifted up a lane (lane 0 adds 0)
    const __m256d y = _mm256_add_pd(x, _mm256_blend_pd(_mm256_permute4x64_pd(x, 0x90), zero, 0x1));
    // lanes 2 and 3 add y's lane 1 to x's lane 2 and y's lane 3
    const __m256d z = _mm256_add_pd(_mm256_blend_pd(y, x, 0x4),
                                    _mm256_blend_pd(_mm256_permute4x64_pd(y, 0x55), zero, 0x3));
    const __m128 sums = _mm256_cvtpd_ps(_mm256_add_pd(dg, z));
    dg = _mm256_add_pd(dg, _mm256_permute4x64_pd(z, 0xFF));
    return sums;
}

// One row's G = a (dA - delta) and its parts for the table, (1 - w) G (to T[lo]) and w G (to T[lo + 1]), written
// over w and D, which are spent; returns G D (for the gate's gradient).
template <typename T>
inline T gradient_parts(int64_t j, const T* a, T* gr, T delta, T* w, T* D) {
    const T G = a[j] * (gr[j] - delta), upper = w[j] * G, GD = G * D[j];
    gr[j] = G;
    w[j] = G - upper;
    D[j] = upper;
    return GD;
}

// One row's gradient of the common argument s q.k: gr[j] = G_j + dg_j g_j (1 - g_j), dg_j the prefix sum of G D
// over keys <= j, summed in double four keys a step as in suffix_positions; w and D become the table's parts.
template <typename T>
inline void gate_gradient_row(int64_t m, const T* a, T* gr, T delta, T* w, T* D, const T* slopes) {
    double dg = 0;
    int64_t j = 0;
    for (; j + 4 <= m; j += 4) {
        const double x0 = gradient_parts(j, a, gr, delta, w, D);
        const double x01 = x0 + gradient_parts(j + 1, a, gr, delta, w, D);
        const double x2 = gradient_parts(j + 2, a, gr, delta, w, D), x012 = x01 + x2;
        const double x0123 = x01 + (x2 + gradient_parts(j + 3, a, gr, delta, w, D));
        gr[j] = std::fma(T(dg + x0), slopes[j], gr[j]);
        gr[j + 1] = std::fma(T(dg + x01), slopes[j + 1], gr[j + 1]);
        gr[j + 2] = std::fma(T(dg + x012), slopes[j + 2], gr[j + 2]);
        gr[j + 3] = std::fma(T(dg + x0123), slopes[j + 3], gr[j + 3]);
        dg += x0123;
    }
    for (; j < m; ++j) {
        dg += gradient_parts(j, a, gr, delta, w, D);
        gr[j] = std::fma(T(dg), slopes[j], gr[j]);
    }
}

// The same for fp32, eight keys at a time (the prefix sums in the same pairs, so to the same bits), then the rest.
inline void gate_gradient_row(int64_t m, const float* a, float* gr, float delta, float* w, float* D,
                              const float* slopes) {
    const __m256 centre = _mm256_set1_ps(delta);
    __m256d dg = _mm256_setzero_pd();
    int64_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const __m256 G = _mm256_mul_ps(_mm256_loadu_ps(a + j), _mm256_sub_ps(_mm256_loadu_ps(gr + j), centre));
        const __m256 upper = _mm256_mul_ps(_mm256_loadu_ps(w + j), G), GD = _mm256_mul_ps(G, _mm256_loadu_ps(D + j));
        _mm256_storeu_ps(w + j, _mm256_sub_ps(G, upper));
        _mm256_storeu_ps(D + j, upper);
        const __m128 low = running_prefix4(_mm256_castps256_ps128(GD), dg);
        const __m128 high = running_prefix4(_mm256_extractf128_ps(GD, 1), dg);
        _mm256_storeu_ps(gr + j, _mm256_fmadd_ps(_mm256_set_m128(high, low), _mm256_loadu_ps(slopes + j), G));
    }
    double sum = _mm256_cvtsd_f64(dg);
    for (; j < m; ++j) {
        sum += gradient_parts(j, a, gr, delta, w, D);
        gr[j] = std::fma(float(sum), slopes[j], gr[j]);
    }
}

// One row's table gradient dt (zeroed here): key j adds its parts to dt[lo_j] and dt[lo_j + 1]. Neighbouring keys
// share lo (it falls by 0 or 1 a key), so one walk waits on each add's store before the next add reads it back; the
// row's quarters are walked side by side, four such chains at once (neighbouring quarters meet at one entry at most,
// whose sum is then formed in another order). Tried: four rows side by side, each row's sums in key order (1.2x
// slower than one row at a time); four copies of the row of dT, key j adding into copy j mod 4 (1.2x slower, the
// copies' zeroing and sum costing more than the waits).
template <typename T>
inline void table_gradient_row(int64_t m, const int32_t* lo, const T* lower, const T* upper, T* dt, int64_t tcols) {
    std::fill(dt, dt + tcols, T(0));
    const auto add = [&](int64_t j) {
        dt[lo[j]] += lower[j];
        dt[lo[j] + 1] += upper[j];
    };
    const int64_t quarter = m / 4;
    for (int64_t j = 0; j < quarter; ++j) {
        add(j);
        add(quarter + j);
        add(2 * quarter + j);
        add(3 * quarter + j);
    }
    for (int64_t j = 4 * quarter; j < m; ++j) add(j);
}

// Backward, second half. On entry grad holds dA = dO v^T (dropout's mask applied); on exit the gradient of the
// gate logits' and scores' common argument s q.k: G + dg g (1 - g), with G = a (dA - delta) and dg_it the prefix
// sum over j <= t of G_ij D_ij. dtable (rows, tcols) receives each row's (1 - w) G at lo and w G at lo + 1; w and
// D are spent (they hold those two parts on exit).
template <typename T>
void gradient_rows(const Tile& t, const T* A, T* grad, const T* delta, const int32_t* lo, T* w, T* D,
                   const T* slopes, T* dtable) {
    for (int64_t row = 0; row < t.rows; ++row) {
        const int64_t m = t.query(row) + 1, at = row * t.n;
        gate_gradient_row(m, A + at, grad + at, delta[row], w + at, D + at, slopes + at);
        table_gradient_row(m, lo + at, w + at, D + at, dtable + row * t.tcols, t.tcols);
        for (int64_t k = m; k < t.n; ++k) grad[at + k] = 0;
    }
}

}  // namespace

#define COPE_ROWS_EXPORTS(T, suffix)                                                                              \
    extern "C" double cope_gates_rows_##suffix(const T* S, T* gates, int64_t rows, int64_t R, int64_t n,          \
                                               int64_t r0) {                                                      \
        return gates_rows<T>({rows, R, n, 0, r0, 0}, S, gates);                                                   \
    }                                                                                                             \
    extern "C" void cope_forward_rows_##suffix(T* S, T* gates, const T* table, T* rowmax, T* rowsum,        \
                                               int64_t rows, int64_t R, int64_t n, int64_t tcols, int64_t r0,     \
                                               int64_t last, double floor) {                                      \
        forward_rows<T>({rows, R, n, tcols, r0, last}, S, gates, table, rowmax, rowsum, static_cast<T>(floor));  \
    }                                                                                                             \
    extern "C" void cope_recompute_rows_##suffix(T* S, T* slopes, int32_t* lo, T* w, T* D, const T* table,        \
                                                 const T* lse, int64_t rows, int64_t R, int64_t n, int64_t tcols, \
                                                 int64_t r0, int64_t last, double floor) {                        \
        recompute_rows<T>({rows, R, n, tcols, r0, last}, S, slopes, lo, w, D, table, lse, static_cast<T>(floor)); \
    }                                                                                                             \
    extern "C" void cope_gradient_rows_##suffix(const T* A, T* grad, const T* delta, const int32_t* lo,           \
                                                T* w, T* D, const T* slopes, T* dtable, int64_t rows, \
                                                int64_t R, int64_t n, int64_t tcols, int64_t r0) {                \
        gradient_rows<T>({rows, R, n, tcols, r0, 0}, A, grad, delta, lo, w, D, slopes, dtable);                  \
    }

COPE_ROWS_EXPORTS(float, f32)
COPE_ROWS_EXPORTS(double, f64)

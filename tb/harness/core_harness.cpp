// tpugen compiled harness: drives a Verilated tpugen_core with programs, at full rate or with
// the seeded stall pattern of tpugen.sim.stalls, checks the host-out stream rules, and writes
// each run's host-out beats, status and cycle count to a binary result file; with a `trace`
// file, it samples the core's probe port (the engines' state, hdl.controller.PROBE_LAYOUT) and
// the streams every cycle and writes the cycles in which that state changed (tpugen.sim.trace).
//
// Built by tpugen.tb.verilator_harness with the generated header "tpugen_harness_config.h"
// (the config's widths, the status layout's offsets, the run timing TPUGEN_RESET_EDGES and
// TPUGEN_RESULT_DELAY of tpugen.tb.harness_timing, the file formats' magics and versions).
// Usage:
//
//   Vtpugen_core JOB          run the job file JOB (format: tpugen.tb.verilator_harness)
//   Vtpugen_core --stalls SEED STREAM THRESHOLD COUNT
//                             print COUNT stall decisions (0/1), for the generator's test
//   Vtpugen_core --bare CYCLES
//                             reset, then clock the model CYCLES times with idle inputs and
//                             print "<cycles> <CPU seconds>": the model's own rate, the bound
//                             of any harness (bench/simspeed.py)
//
// Cycle model (the same as tpugen.tb.core_tb and tpugen.sim.core_sim): per run, reset is high
// for TPUGEN_RESET_EDGES clock edges, then one idle edge with reset low, then cycle 0. In each
// cycle a source with an item and no standing offer draws from its StallPattern (an offer then
// stands until taken), the sink draws every cycle (ready = !stall); inputs settle, transfers
// are sampled (valid && ready), then the clock edge. A run is done at the end of the first
// cycle in which every command and host-in beat was taken in an earlier cycle, at least
// `expect` host-out beats were taken and status.busy is low; the status is read
// TPUGEN_RESULT_DELAY cycles later.

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "Vtpugen_core.h"
#include "verilated.h"
#include "tpugen_harness_config.h"
#if VM_TRACE_VCD
#include "verilated_vcd_c.h"
#endif

// One host-in lane of a binary program (tpugen.hdl.layouts.host_lane_width bits).
#if TPUGEN_LANE_WIDTH > 8
typedef int16_t lane_t;
#else
typedef int8_t lane_t;
#endif

// --- the stall generator (tpugen.sim.stalls, bit for bit) --------------------------------------
struct StallPattern {
    uint32_t state;
    uint32_t threshold;  // round(p * 65536): stall when (x >> 16) < threshold
    StallPattern(uint32_t thr = 0, uint64_t seed = 0, uint32_t stream = 0) : threshold(thr) {
        uint32_t s = (uint32_t)seed * 0x9E3779B1u + (stream + 1u) * 0x85EBCA6Bu;
        state = s ? s : 1u;
    }
    inline bool stall() {
        if (!threshold) return false;  // p == 0: never stalls, the state is not used
        uint32_t x = state;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        state = x;
        return (x >> 16) < threshold;
    }
};

// --- bits of Verilated ports ----------------------------------------------------------------
template <typename T>
static inline void put_words(T& port, const uint32_t* w) {
    if constexpr (sizeof(T) <= 4) port = (T)w[0];
    else port = (uint64_t)w[0] | ((uint64_t)w[1] << 32);
}
template <std::size_t N>
static inline void put_words(VlWide<N>& port, const uint32_t* w) {
    for (std::size_t i = 0; i < N; ++i) port[i] = w[i];
}
template <typename T>
static inline void get_words(const T& port, uint32_t* w) {
    if constexpr (sizeof(T) <= 4) w[0] = (uint32_t)port;
    else { w[0] = (uint32_t)port; w[1] = (uint32_t)((uint64_t)port >> 32); }
}
template <std::size_t N>
static inline void get_words(const VlWide<N>& port, uint32_t* w) {
    for (std::size_t i = 0; i < N; ++i) w[i] = port[i];
}
static inline uint64_t bits(const uint32_t* w, int lo, int width) {
    uint64_t v = 0;
    for (int k = 0; k < width; ++k) {
        int b = lo + k;
        v |= (uint64_t)((w[b >> 5] >> (b & 31)) & 1u) << k;
    }
    return v;
}
static inline uint64_t fast_bits(const uint32_t* w, int lo, int width) {
    // width <= 64: up to three 32-bit words
    int i = lo >> 5, sh = lo & 31;
    unsigned __int128 v = (unsigned __int128)w[i] | ((unsigned __int128)w[i + 1] << 32) |
                          ((unsigned __int128)w[i + 2] << 64);
    v >>= sh;
    return width == 64 ? (uint64_t)v : (uint64_t)v & ((1ull << width) - 1);
}

static_assert(sizeof TPUGEN_BINARY_MAGIC == 9 && sizeof TPUGEN_RESULT_MAGIC == 9 &&
              sizeof TPUGEN_TRACE_MAGIC == 9,
              "the file magics are 8 bytes");

// Word counts (plus two spare words, so that fast_bits may read past the end).
static const int HIN_WORDS = (TPUGEN_HOST_IN_BITS + 31) / 32;
static const int HOUT_WORDS = (TPUGEN_HOST_OUT_BITS + 31) / 32 + 2;
static const int STATUS_WORDS = (TPUGEN_STATUS_BITS + 31) / 32 + 2;

// --- files ----------------------------------------------------------------------------------
[[noreturn]] static void die(const std::string& msg) {
    fprintf(stderr, "tpugen harness: %s\n", msg.c_str());
    exit(2);
}

struct Program {
    std::vector<uint64_t> words;
    std::vector<lane_t> data;  // beats x lanes
    std::vector<uint8_t> last;
    uint64_t beats = 0;
};

static std::vector<char> read_file(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) die("cannot open " + path + ": " + strerror(errno));
    std::vector<char> buf;
    char chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf.insert(buf.end(), chunk, chunk + n);
    fclose(f);
    return buf;
}

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

static Program load_program(const std::string& path) {
    // Layout: tpugen.sim.program (binary program format, version TPUGEN_BINARY_VERSION).
    std::vector<char> b = read_file(path);
    if (b.size() < 48 || memcmp(b.data(), TPUGEN_BINARY_MAGIC, 8) != 0)
        die(path + ": not a binary program");
    uint32_t h[6];
    memcpy(h, b.data() + 8, sizeof h);
    uint64_t n_steps, n_beats;
    memcpy(&n_steps, b.data() + 32, 8);
    memcpy(&n_beats, b.data() + 40, 8);
    if (h[0] != TPUGEN_BINARY_VERSION) die(path + ": unsupported binary program version");
    if (h[2] != TPUGEN_ROWS || h[3] != TPUGEN_COLS || h[4] != TPUGEN_LANES)
        die(path + ": the program is for another array size");
    size_t pos = 48 + pad8(h[5]);
    Program p;
    p.beats = n_beats;
    size_t need = pos + 8 * n_steps + pad8(4 * n_steps) + pad8(n_beats * TPUGEN_LANES * sizeof(lane_t)) + n_beats;
    if (b.size() < need) die(path + ": truncated");
    p.words.resize(n_steps);
    memcpy(p.words.data(), b.data() + pos, 8 * n_steps);
    pos += 8 * n_steps + pad8(4 * n_steps);
    p.data.resize(n_beats * TPUGEN_LANES);
    memcpy(p.data.data(), b.data() + pos, n_beats * TPUGEN_LANES * sizeof(lane_t));
    pos += pad8(n_beats * TPUGEN_LANES * sizeof(lane_t));
    p.last.resize(n_beats);
    memcpy(p.last.data(), b.data() + pos, n_beats);
    return p;
}

struct RunSpec {
    std::string program, result, trace;
    uint32_t thr[3] = {0, 0, 0};
    uint64_t seed = 0;
    int64_t expect = 0, limit = 0, stop_after = -1;
};

struct Job {
    uint64_t rand_seed = 1;
    std::string waves;
    std::vector<RunSpec> runs;
};

static Job load_job(const std::string& path) {
    std::vector<char> b = read_file(path);
    std::string text(b.begin(), b.end());
    Job job;
    size_t pos = 0;
    bool header = false;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        if (line.empty()) continue;
        size_t sp = line.find(' ');
        std::string key = line.substr(0, sp), val = sp == std::string::npos ? "" : line.substr(sp + 1);
        if (!header) {
            if (line != TPUGEN_JOB_HEADER)
                die(path + ": not a harness job (" TPUGEN_JOB_HEADER ")");
            header = true;
        } else if (key == "rand_seed") job.rand_seed = strtoull(val.c_str(), nullptr, 10);
        else if (key == "waves") job.waves = val;
        else if (key == "run") job.runs.emplace_back();
        else if (job.runs.empty()) die(path + ": '" + key + "' before the first 'run'");
        else {
            RunSpec& r = job.runs.back();
            if (key == "program") r.program = val;
            else if (key == "result") r.result = val;
            else if (key == "trace") r.trace = val;
            else if (key == "stalls") {
                unsigned long long s;
                if (sscanf(val.c_str(), "%u %u %u %llu", &r.thr[0], &r.thr[1], &r.thr[2], &s) != 4)
                    die(path + ": bad stalls line");
                r.seed = s;
            } else if (key == "expect") r.expect = strtoll(val.c_str(), nullptr, 10);
            else if (key == "limit") r.limit = strtoll(val.c_str(), nullptr, 10);
            else if (key == "stop_after") r.stop_after = strtoll(val.c_str(), nullptr, 10);
            else die(path + ": unknown key '" + key + "'");
        }
    }
    if (!header) die(path + ": empty job");
    return job;
}

// --- the simulation -------------------------------------------------------------------------
struct Harness {
    VerilatedContext* ctx;
    Vtpugen_core* top;
#if VM_TRACE_VCD
    VerilatedVcdC* tfp = nullptr;
#endif
    uint64_t time = 0;

    void half(int clk) {
        top->clk = clk;
        top->eval();
#if VM_TRACE_VCD
        if (tfp) tfp->dump(time);
#endif
        ++time;
    }
    // One clock cycle whose inputs are already set: settle (clk low), then the rising edge.
    inline void settle() { half(0); }
    inline void edge() { half(1); }

    void idle_inputs() {
        top->cmd___05Fvalid = 0;
        top->host_in___05Fvalid = 0;
        top->host_out___05Fready = 0;
        top->clear_error = 0;
        top->clear_counters = 0;
    }

    void reset() {
        idle_inputs();
        top->rst = 1;
        for (int i = 0; i < TPUGEN_RESET_EDGES; ++i) { settle(); edge(); }
        top->rst = 0;
        settle();
        edge();  // the idle edge after reset
    }
};

// One change of the traced state, or an issue: from `cycle` on (until the next record) the state
// is `state`: the probe's bits from TPUGEN_PROBE_STATE_LO on, then TPUGEN_TRACE_HOST_OUT_WAIT (a
// host-out beat waits for the host's ready) and TPUGEN_TRACE_CMD_WAIT (the host holds back a
// command it has); `word` is the instruction word in the issue register (the probe's bits from
// TPUGEN_PROBE_WORD_LO), the one that issues when the state's issue bit is set.
struct TraceRec {
    int64_t cycle;
    uint32_t state, pad;
    uint64_t word;
};
static_assert(sizeof(TraceRec) == 24, "a trace record is 24 bytes");
static const int PROBE_WORDS = (TPUGEN_PROBE_BITS + 31) / 32 + 2;

struct Result {
    std::vector<int64_t> out;  // beats x cols
    std::vector<TraceRec> trace;
    std::vector<uint8_t> last;
    int64_t first_cmd = -1, last_out = -1, end_cycle = -1;
    int64_t timed_out = 0, stopped = 0, sim_ns = 0;
    uint32_t status[STATUS_WORDS] = {0};
    std::string violations;
    int n_violations = 0;
    void violation(const std::string& s) {
        if (++n_violations <= 10) violations += s + "\n";
    }
};

// CPU time of this process in ns: the speed measures do not depend on other processes' load.
static int64_t cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int) { g_stop = 1; }

static Result run(Harness& h, const Program& p, const RunSpec& spec) {
    Vtpugen_core* top = h.top;
    Result r;
    r.out.reserve((size_t)spec.expect * TPUGEN_COLS);
    r.last.reserve(spec.expect);
    StallPattern s_cmd(spec.thr[0], spec.seed, 0), s_in(spec.thr[1], spec.seed, 1),
        s_out(spec.thr[2], spec.seed, 2);
    h.reset();
    const uint64_t n_cmd = p.words.size(), n_in = p.beats;
    uint64_t ci = 0, hi = 0, n_out = 0;
    bool cmd_offer = false, in_offer = false, pending = false;
    uint32_t in_words[HIN_WORDS + 2];
    uint32_t out_words[HOUT_WORDS], held[HOUT_WORDS];
    memset(held, 0, sizeof held);
    memset(out_words, 0, sizeof out_words);
    int64_t done_at = -1;
    const bool tracing = !spec.trace.empty();
    uint32_t traced = ~0u;  // the state of the last record (none yet)
    uint32_t probe[PROBE_WORDS];
    memset(probe, 0, sizeof probe);
    if (tracing) r.trace.reserve(1024 + 8 * n_cmd);
    const int64_t t0 = cpu_ns();
    for (int64_t cycle = 0;; ++cycle) {
        // Drive.
        if (!cmd_offer && ci < n_cmd) {
            cmd_offer = !s_cmd.stall();
            if (cmd_offer) top->cmd___05Fpayload = p.words[ci];
        }
        if (!in_offer && hi < n_in) {
            in_offer = !s_in.stall();
            if (in_offer) {
                memset(in_words, 0, sizeof in_words);
                const lane_t* lanes = &p.data[hi * TPUGEN_LANES];
#if TPUGEN_LANE_WIDTH == 8 || TPUGEN_LANE_WIDTH == 16
                memcpy(in_words, lanes, TPUGEN_LANES * sizeof(lane_t));   // little endian
#else
                for (int k = 0; k < TPUGEN_LANES; ++k) {
                    uint64_t v = (uint64_t)(uint16_t)lanes[k] & ((1ull << TPUGEN_LANE_WIDTH) - 1);
                    for (int b = 0; b < TPUGEN_LANE_WIDTH; ++b) {
                        int bit = k * TPUGEN_LANE_WIDTH + b;
                        in_words[bit >> 5] |= (uint32_t)((v >> b) & 1u) << (bit & 31);
                    }
                }
#endif
                const int lb = TPUGEN_LANES * TPUGEN_LANE_WIDTH;
                if (p.last[hi]) in_words[lb >> 5] |= 1u << (lb & 31);
                put_words(top->host_in___05Fpayload, in_words);
            }
        }
        const bool ready = !s_out.stall();
        const bool cmd_held_back = !cmd_offer && ci < n_cmd;
        top->cmd___05Fvalid = cmd_offer;
        top->host_in___05Fvalid = in_offer;
        top->host_out___05Fready = ready;
        h.settle();
        // Sample.
        const bool cmds_done = ci == n_cmd, ins_done = hi == n_in;
        if (cmd_offer && top->cmd___05Fready) {
            if (ci == 0) r.first_cmd = cycle;
            ++ci;
            cmd_offer = false;
        }
        if (in_offer && top->host_in___05Fready) {
            ++hi;
            in_offer = false;
        }
        const bool valid = top->host_out___05Fvalid;
        if (tracing) {
            get_words(top->probe, probe);
            const uint32_t state =
                (uint32_t)fast_bits(probe, TPUGEN_PROBE_STATE_LO,
                                    TPUGEN_PROBE_BITS - TPUGEN_PROBE_STATE_LO) |
                (uint32_t)(valid && !ready) << TPUGEN_TRACE_HOST_OUT_WAIT |
                (uint32_t)cmd_held_back << TPUGEN_TRACE_CMD_WAIT;
            if (state != traced || (state & TPUGEN_TRACE_ISSUE)) {
                r.trace.push_back(
                    TraceRec{cycle, state, 0, fast_bits(probe, TPUGEN_PROBE_WORD_LO, 64)});
                traced = state;
            }
        }
        if (valid || pending) get_words(top->host_out___05Fpayload, out_words);
        if (pending) {
            if (!valid) {
                r.violation("host_out: valid dropped before the transfer (cycle " +
                            std::to_string(cycle) + ")");
            } else if (memcmp(out_words, held, sizeof held) != 0) {
                r.violation("host_out: payload changed while waiting for ready (cycle " +
                            std::to_string(cycle) + ")");
            }
        }
        if (valid && ready) {
            for (int j = 0; j < TPUGEN_COLS; ++j) {
                uint64_t v = fast_bits(out_words, j * TPUGEN_ACC_WIDTH, TPUGEN_ACC_WIDTH);
                if (TPUGEN_ACC_WIDTH < 64 && (v >> (TPUGEN_ACC_WIDTH - 1)) & 1)
                    v |= ~0ull << TPUGEN_ACC_WIDTH;
                r.out.push_back((int64_t)v);
            }
            r.last.push_back((uint8_t)bits(out_words, TPUGEN_COLS * TPUGEN_ACC_WIDTH, 1));
            ++n_out;
            r.last_out = cycle;
            pending = false;
        } else {
            pending = valid;
            if (valid) memcpy(held, out_words, sizeof held);
        }
        if (done_at < 0 && cmds_done && ins_done && (int64_t)n_out >= spec.expect &&
            !(top->status[0] & 1u)) {
            done_at = cycle;
        }
        if (done_at >= 0 && cycle == done_at + TPUGEN_RESULT_DELAY) {
            get_words(top->status, r.status);
            r.end_cycle = cycle;
            h.edge();
            break;
        }
        if ((spec.stop_after >= 0 && cycle + 1 >= spec.stop_after) ||
            (spec.limit > 0 && cycle >= spec.limit) || g_stop) {
            r.timed_out = spec.stop_after < 0 && !g_stop;
            r.stopped = 1;
            get_words(top->status, r.status);
            r.end_cycle = cycle;
            h.edge();
            break;
        }
        h.edge();
    }
    r.sim_ns = cpu_ns() - t0;
    return r;
}

// Trace file (little-endian): TPUGEN_TRACE_MAGIC, 4 x i64 header (version, records, the
// cycle the run ended in, bits of the state), then the records (TraceRec).
static void write_trace(const std::string& path, const Result& r) {
    FILE* f = fopen(path.c_str(), "wb");
    if (!f) die("cannot write " + path + ": " + strerror(errno));
    int64_t hdr[4] = {TPUGEN_TRACE_VERSION, (int64_t)r.trace.size(), r.end_cycle,
                      TPUGEN_TRACE_STATE_BITS};
    fwrite(TPUGEN_TRACE_MAGIC, 1, 8, f);
    fwrite(hdr, sizeof hdr, 1, f);
    fwrite(r.trace.data(), sizeof(TraceRec), r.trace.size(), f);
    if (fclose(f) != 0) die("cannot write " + path);
}

static void write_result(const std::string& path, const Result& r) {
    FILE* f = fopen(path.c_str(), "wb");
    if (!f) die("cannot write " + path + ": " + strerror(errno));
    const int64_t n_beats = (int64_t)r.last.size();
    int64_t cause = (int64_t)bits(r.status, TPUGEN_STATUS_CAUSE_LO, TPUGEN_STATUS_CAUSE_WIDTH);
    int64_t hdr[16] = {TPUGEN_RESULT_VERSION,
                       n_beats,
                       TPUGEN_COLS,
                       r.first_cmd >= 0 && r.last_out >= 0 ? r.last_out - r.first_cmd + 1 : 0,
                       r.first_cmd,
                       r.last_out,
                       r.end_cycle,
                       (int64_t)bits(r.status, TPUGEN_STATUS_BUSY, 1),
                       (int64_t)bits(r.status, TPUGEN_STATUS_ERROR, 1),
                       cause,
                       r.timed_out,
                       TPUGEN_N_COUNTERS,
                       r.stopped,
                       (int64_t)r.violations.size(),
                       r.n_violations,
                       r.sim_ns};
    fwrite(TPUGEN_RESULT_MAGIC, 1, 8, f);
    fwrite(hdr, sizeof hdr, 1, f);
    for (int c = 0; c < TPUGEN_N_COUNTERS; ++c) {
        int64_t v = (int64_t)bits(r.status, TPUGEN_STATUS_COUNTERS_LO + 64 * c, 64);
        fwrite(&v, 8, 1, f);
    }
    fwrite(r.out.data(), 8, r.out.size(), f);
    fwrite(r.last.data(), 1, r.last.size(), f);
    fwrite(r.violations.data(), 1, r.violations.size(), f);
    if (fclose(f) != 0) die("cannot write " + path);
}

int main(int argc, char** argv) {
    if (argc == 6 && std::string(argv[1]) == "--stalls") {
        StallPattern s((uint32_t)strtoul(argv[4], nullptr, 10), strtoull(argv[2], nullptr, 10),
                       (uint32_t)strtoul(argv[3], nullptr, 10));
        long n = strtol(argv[5], nullptr, 10);
        std::string outs;
        for (long i = 0; i < n; ++i) outs += s.stall() ? '1' : '0';
        printf("%s\n", outs.c_str());
        return 0;
    }
    if (argc == 3 && std::string(argv[1]) == "--bare") {
        const long long n = strtoll(argv[2], nullptr, 10);
        auto ctx = std::make_unique<VerilatedContext>();
        Harness h;
        h.ctx = ctx.get();
        h.top = new Vtpugen_core{ctx.get()};
        h.reset();
        const int64_t t0 = cpu_ns();
        for (long long i = 0; i < n; ++i) { h.settle(); h.edge(); }
        const double s = (cpu_ns() - t0) * 1e-9;
        printf("%lld %.6f\n", n, s);
        h.top->final();
        delete h.top;
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s JOB | --stalls SEED STREAM THRESHOLD COUNT | --bare CYCLES\n",
                argv[0]);
        return 2;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    Job job = load_job(argv[1]);
    auto ctx = std::make_unique<VerilatedContext>();
    // Randomised initial state (two-state: no X), so that a missing reset shows up.
    ctx->randReset(2);
    ctx->randSeed((int)(job.rand_seed % 0x7fffffff) + 1);
    Harness h;
    h.ctx = ctx.get();
    h.top = new Vtpugen_core{ctx.get()};
#if VM_TRACE_VCD
    if (!job.waves.empty()) {
        ctx->traceEverOn(true);
        h.tfp = new VerilatedVcdC;
        h.top->trace(h.tfp, 99);
        h.tfp->open(job.waves.c_str());
    }
#endif
    int status = 0;
    for (const RunSpec& spec : job.runs) {
        Program p = load_program(spec.program);
        Result r = run(h, p, spec);
        if (!spec.result.empty()) write_result(spec.result, r);
        if (!spec.trace.empty()) write_trace(spec.trace, r);
        if (g_stop) { status = 130; break; }
    }
#if VM_TRACE_VCD
    if (h.tfp) h.tfp->close();
#endif
    h.top->final();
    delete h.top;
    return status;
}

// Multi-process runs on c10d (distributed.hpp): the only file that includes c10d.
#include "sinkscope/api/distributed.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

// ProcessGroupGloo.hpp declares the Gloo backend only under this macro (libtorch is built with
// Gloo; the headers come from libgloo-dev). Defined here, after the precompiled torch header.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/core/system.hpp"

namespace sinkscope::api {

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kWhere = "distributed run";

// The first line of an exception's message (c10 errors carry a backtrace after it).
std::string first_line(const std::exception& e) {
    const auto* c10 = dynamic_cast<const c10::Error*>(&e);
    std::string s = c10 ? c10->what_without_backtrace() : e.what();
    return s.substr(0, s.find('\n'));
}

int64_t env_int(const char* name, int64_t fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    const long long x = std::strtoll(v, &end, 10);
    if (*end != '\0') throw UsageError(std::string(name) + "=" + v + " is not an integer");
    return x;
}

bool is_loopback(const std::string& host) {
    return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// Ends this process with one line: called from the watchdog, which may interrupt the main
// thread anywhere (the staging folders keep their last saved state for --resume).
[[noreturn]] void die(const std::string& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "sinkscope: error: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(static_cast<int>(ErrorKind::Io));
}

std::string key(const char* kind, int64_t rank) {
    return std::string(kind) + std::to_string(rank);
}

std::vector<uint8_t> bytes_of(const std::string& s) {
    return std::vector<uint8_t>(s.begin(), s.end());
}

// A fingerprint value for a one-line message: its JSON, a hash cut to 12 digits, anything longer
// than 48 characters cut.
std::string shown(const nlohmann::json& v) {
    std::string s = v.dump();
    if (v.is_string() && v.get<std::string>().size() == 64) s = s.substr(0, 13) + "...\"";
    if (s.size() > 48) s = s.substr(0, 45) + "...";
    return s;
}

// What a fingerprint key means to a user (the hashes stand for files they gave).
std::string described(const std::string& path) {
    static const std::map<std::string, std::string> names = {
        {"model", "the model (its weight, config and tokenizer files)"},
        {"inputs_sha256", "the input data (SHA-256 of its token ids)"},
        {"calib_sha256", "the --calib data (SHA-256 of its token ids)"},
        {"eval_sha256", "the --eval data (SHA-256 of its token ids)"},
        {"data_sha256", "the --data file (its SHA-256)"},
        {"sinkscope_version", "the sinkscope version"}};
    const auto it = names.find(path);
    return it != names.end() ? it->second : path;
}

// The first place where `b` (rank `r`'s fingerprint) differs from `a` (rank 0's), keys in order,
// as "WHAT: rank r has X, rank 0 has Y"; empty when they are equal.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b,
                             const std::string& path, int64_t r) {
    const auto differ = [&](const nlohmann::json& x, const nlohmann::json& y) {
        return described(path.empty() ? "the run" : path) + ": rank " + std::to_string(r) +
               " has " + (y.is_null() ? "nothing" : shown(y)) + ", rank 0 has " +
               (x.is_null() ? "nothing" : shown(x));
    };
    if (a == b) return {};
    if (a.is_object() && b.is_object()) {
        std::vector<std::string> keys;
        for (const auto& [k, v] : a.items()) keys.push_back(k);
        for (const auto& [k, v] : b.items())
            if (!a.contains(k)) keys.push_back(k);
        std::sort(keys.begin(), keys.end());
        for (const std::string& k : keys) {
            const nlohmann::json x = a.value(k, nlohmann::json()), y = b.value(k, nlohmann::json());
            const std::string d = first_difference(x, y, path.empty() ? k : path + "." + k, r);
            if (!d.empty()) return d;
        }
    }
    if (a.is_array() && b.is_array() && a.size() == b.size())
        for (size_t i = 0; i < a.size(); ++i) {
            const std::string d =
                first_difference(a[i], b[i], path + "[" + std::to_string(i) + "]", r);
            if (!d.empty()) return d;
        }
    return differ(a, b);
}

// SHA-256 of file `f` for model_identity: whole, or above 64 MiB of its size and 64 blocks of
// 1 MiB at evenly spaced offsets (the first at 0, the last ending at the end).
std::string file_identity(const std::filesystem::path& f) {
    constexpr uint64_t kWhole = uint64_t(64) << 20, kBlock = uint64_t(1) << 20, kBlocks = 64;
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(f, ec);
    if (ec) throw IoError(f.string(), "cannot read the model file: " + ec.message());
    if (size <= kWhole) return sha256_file(f);
    std::ifstream in(f, std::ios::binary);
    if (!in) throw IoError(f.string(), "cannot open the model file");
    Sha256 h;
    h.update(&size, sizeof size);
    std::vector<char> buf(kBlock);
    for (uint64_t i = 0; i < kBlocks; ++i) {
        const uint64_t at = (size - kBlock) / (kBlocks - 1) * i;
        in.seekg(std::streamoff(at));
        in.read(buf.data(), std::streamsize(kBlock));
        if (in.gcount() != std::streamsize(kBlock))
            throw IoError(f.string(), "read error while identifying the model file");
        h.update(buf.data(), buf.size());
    }
    return h.hex_digest();
}

}  // namespace

std::string model_identity(const std::filesystem::path& model,
                           const std::vector<std::filesystem::path>& weight_files) {
    std::vector<std::filesystem::path> files = weight_files;
    std::error_code ec;
    if (std::filesystem::is_directory(model, ec))
        for (const char* name : {"config.json", "tokenizer.json", "tokenizer.model",
                                 "tokenizer_config.json", "preprocessor_config.json"}) {
            const std::filesystem::path f = model / name;
            if (std::filesystem::is_regular_file(f, ec) &&
                std::find(files.begin(), files.end(), f) == files.end())
                files.push_back(f);
        }
    std::sort(files.begin(), files.end(),
              [](const auto& x, const auto& y) { return x.filename() < y.filename(); });
    Sha256 h;
    for (const auto& f : files) {
        const std::string line = f.filename().string() + " " + file_identity(f) + "\n";
        h.update(line.data(), line.size());
    }
    return h.hex_digest();
}

DistOptions resolve_dist(const DistOptions& flags) {
    DistOptions o = flags;
    if (o.world_size == 0) o.world_size = env_int("WORLD_SIZE", 1);
    if (o.rank < 0) o.rank = env_int("RANK", 0);
    if (o.world_size < 1) throw UsageError("--world-size (WORLD_SIZE) must be >= 1");
    if (o.world_size > kMaxWorldSize)
        throw UsageError("--world-size (WORLD_SIZE) " + std::to_string(o.world_size) +
                         " is more processes than a run can connect (at most " +
                         std::to_string(kMaxWorldSize) + ")");
    if (o.rank < 0 || o.rank >= o.world_size)
        throw UsageError("--rank (RANK) " + std::to_string(o.rank) + " outside [0, " +
                         std::to_string(o.world_size) + ")");
    // The watchdog beats once a second, so a shorter silence could be a busy machine; a week
    // bounds it well inside the milliseconds c10d counts in.
    if (o.timeout_s < 5 || o.timeout_s > 7 * 86400)
        throw UsageError("--dist-timeout must be between 5 and 604800 seconds");
    if (o.world_size > 1 && o.master.empty()) {
        const char* addr = std::getenv("MASTER_ADDR");
        const char* port = std::getenv("MASTER_PORT");
        if (!addr || !*addr || !port || !*port)
            throw UsageError("a world of " + std::to_string(o.world_size) +
                             " processes needs --master HOST:PORT or MASTER_ADDR and MASTER_PORT");
        o.master = std::string(addr) + ":" + port;
    }
    if (o.world_size > 1) {
        const size_t colon = o.master.rfind(':');
        const int64_t port =
            colon == std::string::npos ? -1 : std::atoll(o.master.c_str() + colon + 1);
        if (colon == 0 || port <= 0 || port > 65535)
            throw UsageError("--master " + o.master + " is not HOST:PORT");
    }
    return o;
}

std::pair<int64_t, int64_t> shard_range(int64_t n, int64_t rank, int64_t world) {
    return {n * rank / world, n * (rank + 1) / world};
}

std::filesystem::path rank_output(const std::filesystem::path& out, int64_t rank) {
    return rank == 0 ? out : std::filesystem::path(out.string() + ".rank" + std::to_string(rank));
}

void end_rank(Communicator& comm, const std::filesystem::path& staging, bool last) {
    comm.finish(last);
    std::error_code ec;
    std::filesystem::remove_all(staging, ec);  // only state for --resume, no longer needed
}

struct Communicator::Impl {
    int64_t rank = 0, world = 1;
    std::chrono::milliseconds timeout{0};
    std::string host;
    uint16_t port = 0;
    c10::intrusive_ptr<c10d::TCPStore> store;  // rank 0 serves it
    c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
    std::thread watchdog;
    std::atomic<bool> stop{false};
    int64_t generation = 0;  // finish() calls so far
    int64_t agreements = 0;  // agree() calls so far

    // Polls the store until it holds every key of `keys`; false once `deadline` has passed.
    bool wait_keys(const std::vector<std::string>& keys, Clock::time_point deadline) const {
        while (!store->check(keys)) {
            if (Clock::now() >= deadline) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return true;
    }

    c10::intrusive_ptr<c10d::TCPStore> connect_store(bool server) const {
        c10d::TCPStoreOptions so;
        so.port = port;
        so.isServer = server;
        so.waitWorkers = false;
        so.timeout = timeout;
        return c10::make_intrusive<c10d::TCPStore>(host, so);
    }

    void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) const {
        try {
            work->wait(timeout);
        } catch (const std::exception& e) {
            // A collective fails when a peer is gone; the watchdog names which one (a posted
            // failure, or a rank silent for the timeout), so it gets that long to end the process.
            std::this_thread::sleep_for(timeout + std::chrono::seconds(3));
            throw IoError(
                kWhere, "rank " + std::to_string(rank) + ": " + what + " failed: " + first_line(e));
        }
    }

    // Posts `message` for the other ranks' watchdogs, then ends this process with it.
    [[noreturn]] void post_and_die(c10d::Store& s, const std::string& message) {
        try {
            s.set("abort", std::vector<uint8_t>(message.begin(), message.end()));
            // Rank 0 serves the store: it stays a moment so the others read the message before
            // the connection drops.
            if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        } catch (...) {
        }
        die(message);
    }

    // The watchdog (distributed.hpp): its own store connection, one round per second.
    void watch() {
        c10::intrusive_ptr<c10d::TCPStore> s;
        try {
            s = connect_store(false);
        } catch (const std::exception& e) {
            die("lost the connection to rank 0 at " + host + ":" + std::to_string(port) + ": " +
                first_line(e));
        }
        std::map<int64_t, std::pair<int64_t, Clock::time_point>> seen;  // rank -> beat, when
        for (int64_t r = 0; r < world; ++r) seen[r] = {-1, Clock::now()};
        while (!stop.load()) {
            try {
                s->add(key("hb/", rank), 1);
                if (s->check({"abort"})) {
                    const std::vector<uint8_t> m = s->get("abort");
                    die(std::string(m.begin(), m.end()));
                }
                for (auto& [r, last] : seen) {
                    if (r == rank || s->check({key("exit/", r)})) continue;
                    const int64_t beat = s->add(key("hb/", r), 0);
                    if (beat != last.first) {
                        last = {beat, Clock::now()};
                    } else if (Clock::now() - last.second > timeout) {
                        post_and_die(*s, "distributed run stopped: rank " + std::to_string(r) +
                                             " gave no sign of life for " +
                                             std::to_string(timeout.count() / 1000) +
                                             " s (killed or hung); the same command with "
                                             "--resume continues");
                    }
                }
            } catch (const std::exception& e) {
                if (stop.load()) return;
                die("distributed run stopped: lost the connection to rank 0 (" + first_line(e) +
                    "); the same command with --resume continues");
            }
            for (int k = 0; k < 10 && !stop.load(); ++k)
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }

    void stop_watchdog() {
        stop = true;
        if (watchdog.joinable()) watchdog.join();
    }

    // Every rank's `mine` (the same shape at every rank) at every rank, in rank order.
    std::vector<at::Tensor> allgather(const at::Tensor& mine, const char* what) {
        std::vector<std::vector<at::Tensor>> out(1);
        for (int64_t r = 0; r < world; ++r) out[0].push_back(at::empty_like(mine));
        std::vector<at::Tensor> in{mine};
        wait(group->allgather(out, in), what);
        return out[0];
    }
};

Communicator::Communicator(const DistOptions& o) : rank_(o.rank), world_(o.world_size) {
    if (world_ == 1) return;
    impl_ = std::make_unique<Impl>();
    Impl& d = *impl_;
    d.rank = rank_;
    d.world = world_;
    d.timeout = std::chrono::seconds(o.timeout_s);
    const size_t colon = o.master.rfind(':');
    d.host = o.master.substr(0, colon);
    d.port = static_cast<uint16_t>(std::atoi(o.master.c_str() + colon + 1));
    // c10d logs its socket retries and timeouts through glog on stderr (several lines with
    // a banner); every failure here reaches the user as one line of our own instead.
    FLAGS_minloglevel = google::GLOG_FATAL;
    // One deadline for the whole join, whatever the world size: the store's connection, then
    // every rank counted in at rank 0's store (each wait of Gloo's own rendezvous would have the
    // full timeout again, and it sets up a connection per rank before it waits).
    const auto deadline = Clock::now() + d.timeout;
    try {
        d.store = d.connect_store(rank_ == 0);
        int64_t joined = d.store->add("joined", 1);
        while (joined < world_) {
            if (Clock::now() >= deadline)
                throw IoError(kWhere, "rank " + std::to_string(rank_) + " of " +
                                          std::to_string(world_) + ": only " +
                                          std::to_string(joined) + " of " + std::to_string(world_) +
                                          " ranks joined at " + o.master + " within " +
                                          std::to_string(o.timeout_s) +
                                          " s (--dist-timeout); start every rank with the same "
                                          "--world-size and --master");
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            joined = d.store->add("joined", 0);
        }
        auto opts = c10d::ProcessGroupGloo::Options::create(d.timeout);
        // A loopback master means every rank is on this machine; otherwise the interface of
        // GLOO_SOCKET_IFNAME, or the one this host's name resolves to.
        const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
        opts->devices.push_back(
            is_loopback(d.host) ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
            : ifname && *ifname ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                                : c10d::ProcessGroupGloo::createDefaultDevice());
        d.group = c10::make_intrusive<c10d::ProcessGroupGloo>(
            c10::make_intrusive<c10d::PrefixStore>("pg", d.store), int(rank_), int(world_), opts);
    } catch (const Error&) {
        throw;
    } catch (const std::exception& e) {
        throw IoError(kWhere, "rank " + std::to_string(rank_) + " of " + std::to_string(world_) +
                                  " could not join at " + o.master + " within " +
                                  std::to_string(o.timeout_s) + " s: " + first_line(e));
    }
    d.watchdog = std::thread([&d] { d.watch(); });
}

Communicator::~Communicator() {
    if (impl_) impl_->stop_watchdog();
}

std::vector<std::string> Communicator::gather(const std::string& bytes) {
    if (!impl_) return {bytes};
    Impl& d = *impl_;
    // Sizes first (to every rank), then every rank's bytes padded to the largest (Gloo's gather
    // needs equal shapes), received at rank 0 only.
    const auto sizes =
        d.allgather(at::tensor({int64_t(bytes.size())}, at::kLong), "gathering sizes");
    int64_t longest = 1;
    for (const auto& s : sizes) longest = std::max(longest, s.item<int64_t>());
    std::vector<at::Tensor> mine{at::zeros({longest}, at::kByte)};
    std::copy(bytes.begin(), bytes.end(), mine[0].data_ptr<uint8_t>());
    std::vector<std::vector<at::Tensor>> all;
    if (rank_ == 0) {
        all.resize(1);
        for (int64_t r = 0; r < world_; ++r) all[0].push_back(at::empty_like(mine[0]));
    }
    c10d::GatherOptions go;
    go.rootRank = 0;
    go.timeout = d.timeout;
    d.wait(d.group->gather(all, mine, go), "gathering states");
    if (rank_ != 0) return {};
    std::vector<std::string> out;
    for (int64_t r = 0; r < world_; ++r) {
        const auto* p = reinterpret_cast<const char*>(all[0][size_t(r)].data_ptr<uint8_t>());
        out.emplace_back(p, size_t(sizes[size_t(r)].item<int64_t>()));
    }
    return out;
}

std::string Communicator::broadcast(const std::string& bytes) {
    if (!impl_) return bytes;
    std::vector<at::Tensor> size{at::tensor({int64_t(bytes.size())}, at::kLong)};
    impl_->wait(impl_->group->broadcast(size), "broadcasting a size");
    const int64_t n = size[0].item<int64_t>();
    std::vector<at::Tensor> data{at::zeros({std::max<int64_t>(n, 1)}, at::kByte)};
    if (rank_ == 0) std::copy(bytes.begin(), bytes.end(), data[0].data_ptr<uint8_t>());
    impl_->wait(impl_->group->broadcast(data), "broadcasting");
    const auto* p = reinterpret_cast<const char*>(data[0].data_ptr<uint8_t>());
    return std::string(p, size_t(n));
}

void Communicator::send(const std::string& bytes, int64_t to) {
    SS_CHECK(impl_ && to >= 0 && to < world_ && to != rank_, "send to rank ", to);
    std::vector<at::Tensor> size{at::tensor({int64_t(bytes.size())}, at::kLong)};
    impl_->wait(impl_->group->send(size, int(to), 0), "sending a size");
    if (bytes.empty()) return;
    // Gloo reads the bytes in place (from_blob: no copy; send does not write them).
    std::vector<at::Tensor> data{
        at::from_blob(const_cast<char*>(bytes.data()), {int64_t(bytes.size())}, at::kByte)};
    impl_->wait(impl_->group->send(data, int(to), 1), "sending");
}

std::string Communicator::recv(int64_t from) {
    SS_CHECK(impl_ && from >= 0 && from < world_ && from != rank_, "recv from rank ", from);
    std::vector<at::Tensor> size{at::empty({1}, at::kLong)};
    impl_->wait(impl_->group->recv(size, int(from), 0), "receiving a size");
    const int64_t n = size[0].item<int64_t>();
    SS_CHECK(n >= 0, "a message of ", n, " bytes");
    std::string out(size_t(n), '\0');
    if (n == 0) return out;
    std::vector<at::Tensor> data{at::from_blob(out.data(), {n}, at::kByte)};  // written in place
    impl_->wait(impl_->group->recv(data, int(from), 1), "receiving");
    return out;
}

void Communicator::all_reduce_sum(std::vector<double>& values) {
    if (!impl_) return;
    const std::string mine(reinterpret_cast<const char*>(values.data()),
                           values.size() * sizeof(double));
    const std::vector<std::string> all = gather(mine);
    std::string sum;
    if (rank_ == 0) {
        std::vector<double> total(values.size(), 0.0);
        for (const std::string& s : all) {
            SS_CHECK(s.size() == mine.size(), "all_reduce_sum of ", s.size() / sizeof(double),
                     " values at one rank and ", values.size(), " at rank 0");
            const auto* v = reinterpret_cast<const double*>(s.data());
            for (size_t i = 0; i < total.size(); ++i) total[i] += v[i];  // rank order
        }
        sum.assign(reinterpret_cast<const char*>(total.data()), mine.size());
    }
    sum = broadcast(sum);
    std::copy(sum.begin(), sum.end(), reinterpret_cast<char*>(values.data()));
}

void Communicator::barrier() {
    if (impl_) impl_->wait(impl_->group->barrier(), "barrier");
}

void Communicator::agree(const nlohmann::json& fingerprint) {
    nlohmann::json mine = fingerprint;
    mine.erase("rank");
    mine["sinkscope_version"] = version_string();
    if (!impl_) return;
    Impl& d = *impl_;
    const std::string round = "agree/" + std::to_string(d.agreements++) + "/";
    std::vector<std::string> keys, read;
    for (int64_t r = 0; r < world_; ++r) {
        keys.push_back(round + std::to_string(r));
        if (r > 0) read.push_back(round + "read/" + std::to_string(r));
    }
    std::vector<nlohmann::json> all;
    try {
        d.store->set(keys[size_t(rank_)], bytes_of(mine.dump()));
        if (!d.wait_keys(keys, Clock::now() + d.timeout))
            throw IoError(kWhere, "rank " + std::to_string(rank_) +
                                      ": not every rank reached the check that the ranks run "
                                      "the same command within " +
                                      std::to_string(d.timeout.count() / 1000) + " s");
        for (const std::string& k : keys) {
            const std::vector<uint8_t> v = d.store->get(k);
            all.push_back(nlohmann::json::parse(std::string(v.begin(), v.end())));
        }
    } catch (const Error&) {
        throw;
    } catch (const std::exception& e) {
        throw IoError(kWhere, "rank " + std::to_string(rank_) +
                                  ": exchanging what the ranks run failed: " + first_line(e));
    }
    std::string difference;
    for (int64_t r = 1; r < world_ && difference.empty(); ++r)
        difference = first_difference(all[0], all[size_t(r)], "", r);
    if (difference.empty()) return;
    // Every rank found the same difference and refuses: no watchdog may take a rank's exit for a
    // failure, and rank 0 serves the store until every rank has read the fingerprints.
    refused_together_ = true;
    d.stop_watchdog();
    try {
        if (rank_ != 0)
            d.store->set(read[size_t(rank_ - 1)], std::vector<uint8_t>{1});
        else
            d.wait_keys(read, Clock::now() + d.timeout);
    } catch (const std::exception&) {
    }
    throw UsageError("the ranks do not run the same command, " + difference +
                     " (every rank needs the same model, data, options and sinkscope version)");
}

void Communicator::report_failure(const std::string& message) noexcept {
    if (!impl_ || refused_together_) return;
    try {
        impl_->stop_watchdog();  // this rank reports its own failure (once, on its main thread)
        std::string line =
            "distributed run stopped: rank " + std::to_string(rank_) + " failed: " + message;
        line = line.substr(0, line.find('\n'));
        impl_->store->set("abort", std::vector<uint8_t>(line.begin(), line.end()));
        if (rank_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    } catch (...) {
    }
}

void Communicator::finish(bool last) {
    if (!impl_) return;
    Impl& d = *impl_;
    const std::string gen = std::to_string(d.generation++) + "/";
    // Polled rather than waited with a timeout: rank 0 may write outputs for longer than the
    // timeout, and the watchdog still ends a rank whose peer dies meanwhile.
    const auto wait_for = [&](const std::vector<std::string>& keys) {
        while (!d.store->check(keys)) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    };
    try {
        if (rank_ == 0) {
            d.store->set("committed/" + gen, std::vector<uint8_t>{1});
            std::vector<std::string> done;
            for (int64_t r = 1; r < world_; ++r) done.push_back(key(("done/" + gen).c_str(), r));
            wait_for(done);
            if (last) d.stop_watchdog();
        } else {
            wait_for({"committed/" + gen});
            // A rank that ends stops its heartbeat first, and says so, so that no watchdog takes
            // its exit (or rank 0's, which ends the store) for a failure.
            if (last) {
                d.stop_watchdog();
                d.store->set(key("exit/", rank_), std::vector<uint8_t>{1});
            }
            d.store->set(key(("done/" + gen).c_str(), rank_), std::vector<uint8_t>{1});
        }
    } catch (const std::exception& e) {
        throw IoError(
            kWhere, "rank " + std::to_string(rank_) + ": ending the run failed: " + first_line(e));
    }
}

}  // namespace sinkscope::api

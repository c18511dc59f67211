// Multi-process runs on c10d (distributed.hpp): the only file that includes c10d.
#include "sinkscope/api/distributed.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

}  // namespace

DistOptions resolve_dist(const DistOptions& flags) {
    DistOptions o = flags;
    if (o.world_size == 0) o.world_size = env_int("WORLD_SIZE", 1);
    if (o.rank < 0) o.rank = env_int("RANK", 0);
    if (o.world_size < 1) throw UsageError("--world-size (WORLD_SIZE) must be >= 1");
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
    try {
        d.store = d.connect_store(rank_ == 0);
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

void Communicator::report_failure(const std::string& message) noexcept {
    if (!impl_) return;
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

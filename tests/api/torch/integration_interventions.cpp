// Ready-made interventions and activation patching (api/interventions.hpp, api/patch.hpp) on
// tinystories656K (a trained Llama with GQA) in float64, against a plain libtorch forward written
// here from the transformers Llama semantics with the same edit made by hand: each intervention's
// logits agree within the float64 bound of two forwards in different summation orders
// (forward_bound.hpp). Patching a run with itself changes nothing and patching every hook
// reproduces the source, exactly.
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "sinkscope/analysis/inputs.hpp"
#include "sinkscope/api/interventions.hpp"
#include "sinkscope/api/patch.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/model.hpp"
#include "tensor_tolerance.hpp"
#include "testing.hpp"
#include "tolerance.hpp"

using namespace sinkscope;

namespace {

// edit(name, layer, t): "k", "v" [T, n_kv, d_head] before RoPE, "pattern" [H, T, T], "z" [T, H,
// d_head]; returns the tensor the forward goes on with.
using Edit = std::function<at::Tensor(const std::string&, int64_t, const at::Tensor&)>;

// A plain float64 Llama forward of one sequence (RMSNorm, rotate_half RoPE with float32 tables
// as transformers makes them, GQA by repeat_interleave, SwiGLU, tied unembedding).
struct PlainLlama {
    std::map<std::string, at::Tensor> w;
    model::ModelConfig c;

    PlainLlama(const std::filesystem::path& dir, const model::ModelConfig& config) : c(config) {
        const auto store = io::open_safetensors(dir / "model.safetensors");
        for (const std::string& name : store->names()) {
            const io::TensorView v = store->get(name);
            std::vector<float> f = io::to_f32(v);
            w[name] = at::tensor(f, at::kFloat).view(v.shape).to(at::kDouble);
        }
    }
    // Tied embeddings: the file holds one of the two matrices.
    const at::Tensor& table(const std::string& name) const {
        if (w.count(name)) return w.at(name);
        return w.at(name == "lm_head.weight" ? "model.embed_tokens.weight" : "lm_head.weight");
    }
    at::Tensor norm(const at::Tensor& x, const std::string& name) const {
        return x * at::rsqrt(x.pow(2).mean(-1, true) + c.norm_eps) * w.at(name);
    }
    at::Tensor rope(const at::Tensor& x, int64_t T) const {
        const int64_t dh = c.d_head;
        const at::Tensor inv =
            1.0 /
            at::pow(c.rope_theta, at::arange(0, dh, 2, at::kLong).to(at::kFloat) / double(dh));
        const at::Tensor ang = at::outer(at::arange(T, at::kFloat), inv.to(at::kFloat));
        const at::Tensor emb = at::cat({ang, ang}, -1);
        const at::Tensor cos = emb.cos().to(at::kDouble).unsqueeze(1);
        const at::Tensor sin = emb.sin().to(at::kDouble).unsqueeze(1);
        const at::Tensor rot =
            at::cat({-x.narrow(-1, dh / 2, dh / 2), x.narrow(-1, 0, dh / 2)}, -1);
        return x * cos + rot * sin;
    }
    at::Tensor logits(const std::vector<int32_t>& ids, const Edit& edit = {}) const {
        const auto keep = [&](const std::string& n, int64_t l, const at::Tensor& t) {
            return edit ? edit(n, l, t) : t;
        };
        const int64_t T = int64_t(ids.size()), H = c.n_heads, Hkv = c.n_kv_heads, dh = c.d_head;
        const at::Tensor idx = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong);
        at::Tensor x = table("model.embed_tokens.weight").index_select(0, idx);
        const at::Tensor mask = at::ones({T, T}, at::kBool).tril();
        for (int64_t l = 0; l < c.n_layers; ++l) {
            const std::string p = "model.layers." + std::to_string(l) + ".";
            const at::Tensor h = norm(x, p + "input_layernorm.weight");
            at::Tensor q = at::matmul(h, w.at(p + "self_attn.q_proj.weight").t()).view({T, H, dh});
            at::Tensor k =
                at::matmul(h, w.at(p + "self_attn.k_proj.weight").t()).view({T, Hkv, dh});
            at::Tensor v =
                at::matmul(h, w.at(p + "self_attn.v_proj.weight").t()).view({T, Hkv, dh});
            k = keep("k", l, k);
            v = keep("v", l, v);
            q = rope(q, T);
            k = rope(k, T);
            const at::Tensor kh = k.repeat_interleave(H / Hkv, 1).transpose(0, 1);  // [H, T, dh]
            const at::Tensor vh = v.repeat_interleave(H / Hkv, 1).transpose(0, 1);
            at::Tensor scores =
                at::matmul(q.transpose(0, 1), kh.transpose(-1, -2)) / std::sqrt(double(dh));
            scores = scores.masked_fill(mask.logical_not(), -INFINITY);
            const at::Tensor pattern = keep("pattern", l, at::softmax(scores, -1));
            const at::Tensor z = keep("z", l, at::matmul(pattern, vh).transpose(0, 1));  // [T,H,dh]
            x = x + at::matmul(z.reshape({T, H * dh}), w.at(p + "self_attn.o_proj.weight").t());
            const at::Tensor h2 = norm(x, p + "post_attention_layernorm.weight");
            const at::Tensor gate = at::silu(at::matmul(h2, w.at(p + "mlp.gate_proj.weight").t()));
            x = x + at::matmul(gate * at::matmul(h2, w.at(p + "mlp.up_proj.weight").t()),
                               w.at(p + "mlp.down_proj.weight").t());
        }
        x = norm(x, "model.norm.weight");
        return at::matmul(x, table("lm_head.weight").t());  // [T, vocab]
    }
    at::Tensor z_of(const std::vector<int32_t>& ids, int64_t layer) const {
        at::Tensor got;
        logits(ids, [&](const std::string& n, int64_t l, const at::Tensor& t) {
            if (n == "z" && l == layer) got = t.clone();
            return t;
        });
        return got;
    }
};

// Two float64 forwards in different summation orders: 2 gamma_K(2^-53) max|logit|, K the terms
// accumulated up to the logits (forward_bound.hpp's count).
double f64_logit_tol(const model::ModelConfig& c, int64_t T, const at::Tensor& logits) {
    const double block = 4.0 * double(c.d_model) + double(c.d_head) + 2.0 * double(T) +
                         double(c.n_heads * c.d_head) + double(c.d_mlp);
    const double k = double(c.n_layers) * block + 2.0 * double(c.d_model);
    return 2.0 * k * testutil::kU64 / (1.0 - k * testutil::kU64) * testutil::max_abs(logits);
}

struct Fixture {
    std::filesystem::path dir;
    model::Model m;
    PlainLlama ref;
    std::vector<std::vector<int32_t>> ids;
    static model::Model load(const std::filesystem::path& dir) {
        model::LoadOptions o;
        o.runtime.dtype = model::ComputeDType::Float64;
        return model::load_model(dir, o);
    }
    explicit Fixture(const std::filesystem::path& d) : dir(d), m(load(d)), ref(d, m.config()) {
        for (const char* text : {"Once upon a time there was a little girl named Lily.",
                                 "The dog ran to the park and saw a big red ball there.",
                                 "Tom and his mom baked a cake for the birthday party."})
            ids.push_back(m.encode(text, tokenizer::BosPolicy::Always));
    }
    // sinkscope's logits [T, vocab] of input n with the plan's hooks.
    at::Tensor logits(size_t n, const model::CaptureSpec& spec) const {
        return m.forward(ids[n], spec).logits[0];
    }
};

std::filesystem::path tiny_dir(const std::filesystem::path& shared) {
    return shared / "models" / "tinystories656K";
}

at::Tensor scaled_row(const at::Tensor& t, int64_t pos, double s) {
    at::Tensor out = t.clone();
    out.select(0, pos).mul_(s);
    return out;
}

}  // namespace

TEST(Interventions, EachAgreesWithAPlainForwardWithTheSameEdit) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const Fixture f(tiny_dir(shared));
    const model::ModelConfig& c = f.m.config();
    const std::vector<int32_t>& ids = f.ids[0];
    const int64_t T = int64_t(ids.size());
    // The plain forward without an edit first: the reference itself agrees with sinkscope.
    const at::Tensor plain = f.ref.logits(ids);
    testutil::expect_close("plain forward", f.logits(0, {}), plain, f64_logit_tol(c, T, plain));
    const auto remove = [](bool renormalize) {
        return [renormalize](const std::string& n, int64_t, const at::Tensor& t) {
            if (n != "pattern") return t;
            at::Tensor p = t.clone();  // [H, T, T]
            if (!renormalize) {
                p.select(2, 0).zero_();
                return p;
            }
            p.narrow(1, 1, p.size(1) - 1).select(2, 0).zero_();  // row 0 sees only the sink
            return p / p.sum(-1, true);
        };
    };
    struct Case {
        std::string spec;
        Edit edit;
    };
    const std::vector<Case> cases{
        {"sink_removal", remove(true)},
        {"sink_removal:renormalize=no", remove(false)},
        {"sink_key:scale=0",
         [](const std::string& n, int64_t, const at::Tensor& t) {
             return n == "k" ? scaled_row(t, 0, 0.0) : t;
         }},
        {"sink_key:scale=0.25:layers=1",
         [](const std::string& n, int64_t l, const at::Tensor& t) {
             return n == "k" && l == 1 ? scaled_row(t, 0, 0.25) : t;
         }},
        {"sink_value:scale=0",
         [](const std::string& n, int64_t, const at::Tensor& t) {
             return n == "v" ? scaled_row(t, 0, 0.0) : t;
         }},
        {"head_ablation:mode=zero:heads=0.3,1.5",
         [](const std::string& n, int64_t l, const at::Tensor& t) {
             if (n != "z" || (l != 0 && l != 1)) return t;
             at::Tensor z = t.clone();  // [T, H, dh]
             z.select(1, l == 0 ? 3 : 5).zero_();
             return z;
         }},
    };
    for (const Case& k : cases) {
        SCOPED_TRACE(k.spec);
        model::CaptureSpec spec;
        api::InterventionInput in;
        in.ids = ids;
        api::add_interventions(spec, api::parse_interventions(k.spec, c), c, in);
        const at::Tensor got = f.logits(0, spec), expected = f.ref.logits(ids, k.edit);
        testutil::expect_close("logits", got, expected, f64_logit_tol(c, T, expected));
        testutil::expect_differs("intervened vs plain", got, plain, 1e-6);
    }
}

TEST(Interventions, MeanAndResampleAblationReadTheOtherInputs) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const Fixture f(tiny_dir(shared));
    const model::ModelConfig& c = f.m.config();
    analysis::AnalysisInputs inputs;
    inputs.ids = f.ids;
    // mean: hook_z of layer 0 head 2 replaced by its mean over every position of every input
    std::vector<at::Tensor> zs;
    for (const auto& ids : f.ids) zs.push_back(f.ref.z_of(ids, 0));
    const at::Tensor z_mean = at::cat(zs, 0).mean(0);  // [H, dh]
    const api::RunInterventions mean(
        f.m, inputs, api::parse_interventions("head_ablation:mode=mean:heads=0.2", c), -1);
    // resample: input n reads input n + 1's hook_z (its last position past its length)
    const api::RunInterventions resample(
        f.m, inputs, api::parse_interventions("head_ablation:mode=resample:heads=0.2", c), -1);
    for (size_t n = 0; n < f.ids.size(); ++n) {
        SCOPED_TRACE(n);
        const int64_t T = int64_t(f.ids[n].size());
        const at::Tensor expected_mean =
            f.ref.logits(f.ids[n], [&](const std::string& name, int64_t l, const at::Tensor& t) {
                if (name != "z" || l != 0) return t;
                at::Tensor z = t.clone();
                z.select(1, 2).copy_(z_mean[2].expand({T, c.d_head}));
                return z;
            });
        // The mean over inputs is itself a sum of N T terms in another order: one more gamma.
        testutil::expect_close("mean ablation", f.logits(n, mean.edits_for(n)), expected_mean,
                               2.0 * f64_logit_tol(c, T, expected_mean));
        const at::Tensor src = zs[(n + 1) % zs.size()];
        const int64_t Ts = src.size(0);
        const at::Tensor expected_resample =
            f.ref.logits(f.ids[n], [&](const std::string& name, int64_t l, const at::Tensor& t) {
                if (name != "z" || l != 0) return t;
                at::Tensor z = t.clone();
                for (int64_t p = 0; p < T; ++p) z[p][2].copy_(src[std::min(p, Ts - 1)][2]);
                return z;
            });
        testutil::expect_close("resample ablation", f.logits(n, resample.edits_for(n)),
                               expected_resample, 2.0 * f64_logit_tol(c, T, expected_resample));
    }
}

TEST(Interventions, BadSpecsNameThePart) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const Fixture f(tiny_dir(shared));
    const model::ModelConfig& c = f.m.config();
    for (const char* bad : {"sink_removal:renormalize=maybe", "sink_key", "sink_key:scale=nan",
                            "sink_key:scale=1:sink=argmax", "head_ablation:mode=zero",
                            "head_ablation:mode=zero:heads=9.0", "sink_removal:layers=7", "nothing",
                            "sink_value:scale=1:sink=later"}) {
        SCOPED_TRACE(bad);
        try {
            api::parse_interventions(bad, c);
            ADD_FAILURE() << "accepted";
        } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find("--intervene"), std::string::npos) << e.what();
        }
    }
    const api::InterventionPlan far = api::parse_interventions("sink_key:scale=0:sink=40", c);
    model::CaptureSpec spec;
    api::InterventionInput in;
    in.ids = f.ids[0];
    EXPECT_THROW(api::add_interventions(spec, far, c, in), UsageError);
    EXPECT_EQ(api::parse_interventions(" sink_removal ; sink_value:scale=0.5:layers=0-1", c).text(),
              "sink_removal:renormalize=yes:sink=first;sink_value:scale=0.5:layers=all:sink=first");
}

TEST(Interventions, PatchingIsExactAndAgreesWithAPlainForward) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const Fixture f(tiny_dir(shared));
    const model::ModelConfig& c = f.m.config();
    const std::vector<int32_t> source =
        f.m.encode("The cat sat on the mat.", tokenizer::BosPolicy::Always);
    const std::vector<int32_t> target =
        f.m.encode("The dog sat on the mat.", tokenizer::BosPolicy::Always);
    ASSERT_EQ(source.size(), target.size());
    api::PatchOptions o;
    o.hook_kinds = "embed,resid_pre,k,pattern,z,resid_post";
    o.per_position = true;
    // Patching the target with itself: every row is the target's own value, bit for bit.
    const api::PatchSweep self = api::patch_sweep(f.m, target, target, o);
    const auto& rows = self.table.rows();
    ASSERT_GT(rows.size(), 10u);
    for (const auto& r : rows)
        EXPECT_EQ(std::get<double>(r[5]), self.target_value) << std::get<std::string>(r[0]);
    // From the source: hook * (every hook patched) is the source run itself, bit for bit.
    const api::PatchSweep sweep = api::patch_sweep(f.m, source, target, o);
    const auto& last = sweep.table.rows().back();
    EXPECT_EQ(std::get<std::string>(last[0]), "*");
    EXPECT_EQ(std::get<double>(last[5]), sweep.source_value);
    EXPECT_NE(sweep.source_value, sweep.target_value);
    // One head's z from the source (layer 1, head 3) against the plain forward with that edit.
    const at::Tensor src_z = f.ref.z_of(source, 1);
    const at::Tensor patched =
        f.ref.logits(target, [&](const std::string& n, int64_t l, const at::Tensor& t) {
            if (n != "z" || l != 1) return t;
            at::Tensor z = t.clone();
            z.select(1, 3).copy_(src_z.select(1, 3));
            return z;
        });
    const at::Tensor lp = at::log_softmax(patched, -1);
    double nll = 0;
    for (size_t t = 0; t + 1 < source.size(); ++t)
        nll -= lp[int64_t(t)][source[t + 1]].item<double>();
    nll /= double(source.size() - 1);
    bool found = false;
    for (const auto& r : sweep.table.rows())
        if (std::get<std::string>(r[0]) == "blocks.1.attn.hook_z" && std::get<int64_t>(r[2]) == 3) {
            found = true;
            // the NLL moves by at most the logits' bound twice (log-sum-exp and the logit)
            EXPECT_NEAR(std::get<double>(r[5]), nll,
                        2.0 * f64_logit_tol(c, int64_t(source.size()), patched));
        }
    EXPECT_TRUE(found);
    // Different lengths, a vision or encoder model: refused.
    o.hook_kinds = "z";
    EXPECT_THROW(
        api::patch_sweep(f.m, source, std::vector<int32_t>(target.begin(), target.end() - 1), o),
        UsageError);
    o.hook_kinds = "nope";
    EXPECT_THROW(api::patch_sweep(f.m, source, target, o), UsageError);
}

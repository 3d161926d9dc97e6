// SAC's (and OPD's MSE distillation's) gradients in one call, optionally with Adam's step and
// the target critic's Polyak update: the arithmetic of agentic_rl/algos/sac_grads.py without
// its ~600 tensor operations, from the raw batch. The observations are normalised here; every
// matrix product is one BLAS sgemm on raw pointers (the BLAS torch links, MKL on x86); bias,
// ReLU, ReLU-backward and bias-gradient sums are plain loops over the products' outputs; the
// tanh-Gaussian's transcendental functions use ATen's vectorised kernels on [2B, a] tensors.
//
// Registered as torch.ops.agentic_rl.sac_gradients, sac_act (the actor's forward for acting)
// and set_flush_denormal; agentic_rl/algos/sac_fused.py builds this file and calls them. float32,
// contiguous CPU tensors only. Layouts: actor nn.Linear weights [out, in]; ensemble
// (EnsembleLinear) weights [n, in, out], biases [n, 1, out].
#include <ATen/ATen.h>
#include <torch/library.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c,
                       const int* ldc);

namespace {

using at::Tensor;
using at::TensorList;

constexpr double kLogStdMin = -5.0, kLogStdMax = 2.0;
constexpr double kLogStdScale = 0.5 * (kLogStdMax - kLogStdMin);
const double kHalfLog2Pi = 0.5 * std::log(2.0 * M_PI);
const double kLog2 = std::log(2.0);

// Row-major C[m, n] = op(A) op(B) + beta C, op(A) [m, k] and op(B) [k, n]. A is stored [m, k],
// or [k, m] with trans_a (B likewise); lda, ldb, ldc are the stored row lengths.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  // BLAS is column-major, where a row-major matrix reads as its transpose: C^T = op(B)^T op(A)^T.
  const char ta = trans_b ? 'T' : 'N', tb = trans_a ? 'T' : 'N';
  const int M = static_cast<int>(n), N = static_cast<int>(m), K = static_cast<int>(k);
  const int LDA = static_cast<int>(ldb), LDB = static_cast<int>(lda), LDC = static_cast<int>(ldc);
  const float one = 1.0f;
  sgemm_(&ta, &tb, &M, &N, &K, &one, B, &LDA, A, &LDB, &beta, C, &LDC);
}

// The elementwise loops below are compiled for AVX-512, AVX2 (both with FMA) and the baseline
// ISA; the loader picks the best the CPU has (GCC function multi-versioning).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define VECTORISED \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VECTORISED
#endif

// out[r, j] += bias[j], then ReLU if `relu`.
VECTORISED void add_bias(float* out, const float* bias, int64_t rows, int64_t cols, bool relu) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = out + r * cols;
    if (relu)
      for (int64_t j = 0; j < cols; ++j) row[j] = std::max(row[j] + bias[j], 0.0f);
    else
      for (int64_t j = 0; j < cols; ++j) row[j] += bias[j];
  }
}

// ReLU backward in place: grad where the layer's output was positive, 0 elsewhere.
VECTORISED void relu_backward(float* grad, const float* output, int64_t count) {
  for (int64_t k = 0; k < count; ++k) grad[k] = output[k] > 0.0f ? grad[k] : 0.0f;
}

// ReLU backward in place over grad [rows, cols], summing the result's columns into sums (the
// bias gradient of the layer below, in the same pass).
VECTORISED void relu_backward_sums(float* grad, const float* output, int64_t rows, int64_t cols,
                                   float* sums) {
  std::fill(sums, sums + cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      const float g = output[r * cols + j] > 0.0f ? grad[r * cols + j] : 0.0f;
      grad[r * cols + j] = g;
      sums[j] += g;
    }
}

// sums[j] = sum_r grad[r, j] over `rows` rows of length `cols` (a bias gradient).
VECTORISED void column_sums(const float* grad, int64_t rows, int64_t cols, float* sums) {
  std::fill(sums, sums + cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) sums[j] += grad[r * cols + j];
}

// One Adam step over `count` values with torch.optim.Adam's arithmetic as its fused CPU kernel
// computes it in float (no weight decay, amsgrad or maximize), including the two fused
// multiply-adds of torch's vectorised loop: the results equal torch's bit for bit, except now
// and then by an ulp in the values past a tensor's last full vector, which torch's scalar
// tail rounds differently. With `target`, the target network's copy then moves towards the
// new value by tau, as torch.lerp computes it for tau < 0.5. Called right after the gradient
// is written, while it and the parameter are in cache.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
VECTORISED void adam_values(float* __restrict param, const float* __restrict grad,
                            float* __restrict exp_avg, float* __restrict exp_avg_sq,
                            int64_t count, float grad_coef, float beta2, float sq_coef,
                            float step_size, float bias2_sqrt, float eps,
                            float* __restrict target, float tau) {
  for (int64_t k = 0; k < count; ++k) {
    const float g = grad[k];
    const float m = __builtin_fmaf(grad_coef, g - exp_avg[k], exp_avg[k]);
    const float v = __builtin_fmaf(sq_coef * g, g, exp_avg_sq[k] * beta2);
    exp_avg[k] = m;
    exp_avg_sq[k] = v;
    param[k] = param[k] + -step_size * m / (__builtin_sqrtf(v) / bias2_sqrt + eps);
  }
  if (target != nullptr)
    for (int64_t k = 0; k < count; ++k)
      target[k] = __builtin_fmaf(tau, param[k] - target[k], target[k]);
}
#pragma GCC pop_options

float* ptr(const Tensor& t) { return t.data_ptr<float>(); }

// Flush-to-zero and denormals-are-zero for this thread (MXCSR bits, x86 only); returns the
// previous setting. Adam's second moments of dead units decay into the denormal range after
// some thousands of updates, and then its step runs several times slower.
bool set_flush_denormal(bool on) {
#if defined(__x86_64__) || defined(__i386__)
  constexpr unsigned int kBits = 0x8040;  // FTZ | DAZ
  const unsigned int csr = _mm_getcsr();
  _mm_setcsr(on ? (csr | kBits) : (csr & ~kBits));
  return (csr & kBits) == kBits;
#else
  return false;
#endif
}

// FTZ/DAZ for the rest of the scope; the caller's two bits are restored after.
class FlushDenormals {
 public:
  FlushDenormals() : previous_(set_flush_denormal(true)) {}
  ~FlushDenormals() { set_flush_denormal(previous_); }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  bool previous_;
};

// Scratch tensors kept from one call to the next, one per (use, layer, shape): freshly
// allocated activations of a few MB come back from the allocator as new pages, and their page
// faults cost about a fifth of the [256,256] call. `use` and `index` name the buffer's role.
Tensor scratch(const char* use, int64_t index, at::IntArrayRef shape) {
  using Key = std::pair<std::pair<const char*, int64_t>, std::vector<int64_t>>;
  thread_local std::map<Key, Tensor> buffers;
  Tensor& buffer = buffers[{{use, index}, shape.vec()}];
  if (!buffer.defined()) buffer = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  return buffer;
}

void check(const Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous(), name,
              " must be a contiguous float32 CPU tensor");
}

// Adam's step for the parameters [actor..., critic..., log_alpha] from the optimiser's state
// `state` = [exp_avg of each, exp_avg_sq of each, step counters...] (FusedAdam.flat_state),
// each parameter's learning rate, and hyper = [beta1, beta2, eps, tau]. Empty: no step.
// Everything is checked here, before any value changes; `count_step` then counts the step
// (called once, when the gradients are done), and `apply` steps one parameter.
class AdamStep {
 public:
  AdamStep(TensorList state, at::ArrayRef<double> lrs, at::ArrayRef<double> hyper,
           TensorList actor, TensorList critic, const Tensor& log_alpha)
      : state_(state), lrs_(lrs), count_(actor.size() + critic.size() + 1) {
    if (state.empty()) return;
    TORCH_CHECK(static_cast<int64_t>(state.size()) > 2 * count_ &&
                    static_cast<int64_t>(lrs.size()) == count_ && hyper.size() == 4,
                "Adam's state must be [exp_avg x n, exp_avg_sq x n, counters...] with n "
                "learning rates and [beta1, beta2, eps, tau]");
    for (const Tensor& t : state) check(t, "Adam state");
    int64_t index = 0;
    for (TensorList params : {actor, critic, TensorList(log_alpha)})
      for (const Tensor& param : params) {
        TORCH_CHECK(state[index].numel() == param.numel() &&
                        state[count_ + index].numel() == param.numel(),
                    "Adam's state does not match the parameters");
        ++index;
      }
    // The step about to be taken; torch computes these (and 1 - beta) in double, then rounds
    // them to float.
    const double step = ptr(state[2 * count_])[0] + 1.0;
    beta1_ = hyper[0], beta2_ = hyper[1], eps_ = hyper[2], tau_ = hyper[3];
    bias1_ = 1.0 - std::pow(beta1_, step);
    bias2_sqrt_ = std::sqrt(1.0 - std::pow(beta2_, step));
  }
  explicit operator bool() const { return !state_.empty(); }

  // Add one to every step counter (they are shared per parameter group).
  void count_step() const {
    for (size_t c = 2 * count_; c < state_.size(); ++c) {
      float* counter = ptr(state_[c]);
      for (int64_t k = 0; k < state_[c].numel(); ++k) counter[k] += 1.0f;
    }
  }

  // Step parameter `index` (its gradient in grad); with `target`, Polyak-update it too.
  void apply(const Tensor& param, const Tensor& grad, int64_t index,
             const Tensor* target = nullptr) const {
    adam_values(ptr(param), ptr(grad), ptr(state_[index]), ptr(state_[count_ + index]),
                param.numel(), static_cast<float>(1.0 - beta1_), static_cast<float>(beta2_),
                static_cast<float>(1.0 - beta2_), static_cast<float>(lrs_[index] / bias1_),
                static_cast<float>(bias2_sqrt_), static_cast<float>(eps_),
                target ? ptr(*target) : nullptr, static_cast<float>(tau_));
  }

 private:
  TensorList state_;
  at::ArrayRef<double> lrs_;
  int64_t count_;
  double beta1_ = 0, beta2_ = 0, eps_ = 0, tau_ = 0, bias1_ = 1, bias2_sqrt_ = 1;
};

// Ensemble MLP over one input z [R, in] shared by all members: q [n, R]. With `hidden`, the
// hidden activations (after ReLU, [n, R, h] each) are appended to it for the backward pass.
Tensor ensemble_forward(TensorList params, const Tensor& z, std::vector<Tensor>* hidden,
                        const char* use) {
  const int64_t layers = static_cast<int64_t>(params.size()) / 2;
  const int64_t members = params[0].size(0), rows = z.size(0);
  Tensor input = z;
  for (int64_t k = 0; k < layers; ++k) {
    const int64_t width = params[2 * k].size(1), out = params[2 * k].size(2);
    Tensor output = scratch(use, k, {members, rows, out});
    for (int64_t i = 0; i < members; ++i) {
      const float* member_input = k == 0 ? ptr(z) : ptr(input) + i * rows * width;
      float* member_output = ptr(output) + i * rows * out;
      gemm(false, false, rows, out, width, member_input, width,
           ptr(params[2 * k]) + i * width * out, out, 0.0f, member_output, out);
      add_bias(member_output, ptr(params[2 * k + 1]) + i * out, rows, out, k < layers - 1);
    }
    if (hidden && k < layers - 1) hidden->push_back(output);
    input = output;
  }
  return input.view({members, rows});
}

// row = g * w where the layer's output h was positive, 0 elsewhere (through a one-output layer
// and its input's ReLU).
VECTORISED void masked_scale(float* row, const float* h, float g, const float* w, int64_t n) {
  for (int64_t c = 0; c < n; ++c) row[c] = h[c] > 0.0f ? g * w[c] : 0.0f;
}

// Backward of the ensemble from dL/dq [n, R]: weight and bias gradients from the first `rows`
// rows only (written into grads), and dL/d(trailing act_dim input columns) of the other rows,
// summed over members: [R - rows, act_dim].

Tensor ensemble_backward(TensorList params, TensorList grads, const Tensor& z,
                         const std::vector<Tensor>& hidden, const Tensor& grad_q, int64_t rows,
                         int64_t act_dim) {
  const int64_t layers = static_cast<int64_t>(params.size()) / 2;
  const int64_t members = params[0].size(0), total = z.size(0);
  TORCH_CHECK(params[2 * layers - 2].size(2) == 1, "the ensemble's last layer must have 1 output");
  Tensor grad = grad_q;  // [n, grad_rows, out]; the weights learn from its first `rows` rows
  int64_t grad_rows = total;
  for (int64_t k = layers - 1; k >= 0; --k) {
    const int64_t width = params[2 * k].size(1), out = params[2 * k].size(2);
    Tensor grad_input = k > 0 ? scratch("critic_grad", k, {members, rows, width}) : Tensor();
    for (int64_t i = 0; i < members; ++i) {
      const float* input = k == 0 ? ptr(z) : ptr(hidden[k - 1]) + i * total * width;
      const float* member_grad = ptr(grad) + i * grad_rows * out;
      const float* member_weight = ptr(params[2 * k]) + i * width * out;
      gemm(true, false, width, out, rows, input, width, member_grad, out, 0.0f,
           ptr(grads[2 * k]) + i * width * out, out);
      if (k == layers - 1)  // lower layers' bias gradients come with the ReLU backward below
        column_sums(member_grad, rows, out, ptr(grads[2 * k + 1]) + i * out);
      if (k > 0) {
        float* below = ptr(grad_input) + i * rows * width;
        float* below_bias_grad = ptr(grads[2 * k - 1]) + i * width;
        gemm(false, true, rows, width, out, member_grad, out, member_weight, out, 0.0f, below,
             width);
        relu_backward_sums(below, input, rows, width, below_bias_grad);
      }
    }
    grad = grad_input;
    grad_rows = rows;
  }
  // The action gradient of the other rows. There a member's dL/dq is zero except on the rows
  // where it is the minimum (the actor loss reads min_i Q_i), so each member back-propagates
  // only its own rows: half the products of a dense pass with twin critics.
  Tensor grad_action = scratch("critic_grad_action", 0, {total - rows, act_dim});
  std::fill(ptr(grad_action), ptr(grad_action) + (total - rows) * act_dim, 0.0f);
  std::vector<int64_t> picked;
  picked.reserve(total - rows);
  for (int64_t i = 0; i < members; ++i) {
    const float* member_grad_q = ptr(grad_q) + i * total + rows;
    picked.clear();
    for (int64_t r = 0; r < total - rows; ++r)
      if (member_grad_q[r] != 0.0f) picked.push_back(r);
    const int64_t count = static_cast<int64_t>(picked.size());
    if (count == 0) continue;
    int64_t width = params[2 * layers - 2].size(1);
    const float* top_weight = ptr(params[2 * layers - 2]) + i * width;
    Tensor compact = scratch("critic_compact", layers - 1, {total - rows, width});
    const float* top_input = ptr(hidden[layers - 2]) + (i * total + rows) * width;
    for (int64_t j = 0; j < count; ++j)
      masked_scale(ptr(compact) + j * width, top_input + picked[j] * width,
                   member_grad_q[picked[j]], top_weight, width);
    for (int64_t k = layers - 2; k >= 1; --k) {
      const int64_t below_width = params[2 * k].size(1);
      Tensor below = scratch("critic_compact", k, {total - rows, below_width});
      gemm(false, true, count, below_width, width, ptr(compact), width,
           ptr(params[2 * k]) + i * below_width * width, width, 0.0f, ptr(below), below_width);
      const float* input = ptr(hidden[k - 1]) + (i * total + rows) * below_width;
      for (int64_t j = 0; j < count; ++j)
        relu_backward(ptr(below) + j * below_width, input + picked[j] * below_width, below_width);
      compact = below;
      width = below_width;
    }
    const int64_t in_features = params[0].size(1);
    Tensor member_action = scratch("critic_compact_action", 0, {total - rows, act_dim});
    gemm(false, true, count, act_dim, width, ptr(compact), width,
         ptr(params[0]) + (i * in_features + in_features - act_dim) * width, width, 0.0f,
         ptr(member_action), act_dim);
    float* ga = ptr(grad_action);
    const float* ma = ptr(member_action);
    for (int64_t j = 0; j < count; ++j)
      for (int64_t c = 0; c < act_dim; ++c) ga[picked[j] * act_dim + c] += ma[j * act_dim + c];
  }
  return grad_action;
}

// Copy `rows` rows of `src` [rows, cols] into columns [offset, offset + cols) of dst [rows, ld].
void copy_columns(float* dst, int64_t ld, int64_t offset, const float* src, int64_t rows,
                  int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * ld + offset, src + r * cols, cols * sizeof(float));
}

// The policy's input: the normalised observation, then the normalised goal (if any), each
// clamp((v - mean) * scale, -clip, clip) as RunningNormalizer computes it.
struct PolicyInput {
  Tensor obs_mean, obs_scale, goal_mean, goal_scale;
  float obs_clip, goal_clip;

  PolicyInput(TensorList normalizers, at::ArrayRef<double> clips)
      : obs_mean(normalizers[0]), obs_scale(normalizers[1]), goal_mean(normalizers[2]),
        goal_scale(normalizers[3]), obs_clip(static_cast<float>(clips[0])),
        goal_clip(static_cast<float>(clips[1])) {
    for (const Tensor& t : normalizers) check(t, "normaliser statistics");
  }
  int64_t obs_dim() const { return obs_mean.numel(); }
  int64_t goal_dim() const { return goal_mean.numel(); }

  // Write the inputs of `obs` [rows, o] and `goal` [rows, g] into dst (row stride ld).
  void write(float* dst, int64_t ld, const Tensor& obs, const std::optional<Tensor>& goal) const {
    const int64_t rows = obs.size(0), o = obs_dim(), g = goal_dim();
    check(obs, "observation");
    TORCH_CHECK(obs.dim() == 2 && obs.size(1) == o, "observations must be [rows, ", o, "]");
    TORCH_CHECK(g == 0 || (goal.has_value() && goal->sizes() == at::IntArrayRef({rows, g})),
                "goals must be [rows, ", g, "]");
    normalise(dst, ld, ptr(obs), rows, o, ptr(obs_mean), ptr(obs_scale), obs_clip);
    if (g > 0) {
      check(*goal, "goal");
      normalise(dst + o, ld, ptr(*goal), rows, g, ptr(goal_mean), ptr(goal_scale), goal_clip);
    }
  }

  static void normalise(float* dst, int64_t ld, const float* src, int64_t rows, int64_t cols,
                        const float* mean, const float* scale, float clip) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j)
        dst[r * ld + j] = std::clamp((src[r * cols + j] - mean[j]) * scale[j], -clip, clip);
  }
};

Tensor sac_gradients(const Tensor& obs, const Tensor& next_obs, const std::optional<Tensor>& goal,
                     const Tensor& action, const Tensor& reward, const Tensor& terminated,
                     const Tensor& noise, const std::optional<Tensor>& proto_obs,
                     const std::optional<Tensor>& proto_goal,
                     const std::optional<Tensor>& proto_action, double proto_weight,
                     TensorList normalizers, at::ArrayRef<double> clips, TensorList actor,
                     TensorList actor_grads, TensorList critic, TensorList critic_grads,
                     TensorList target, const Tensor& log_alpha, const Tensor& log_alpha_grad,
                     double gamma, double target_entropy, TensorList adam_state,
                     at::ArrayRef<double> adam_lrs, at::ArrayRef<double> adam_hyper,
                     const std::optional<Tensor>& weight, const std::optional<Tensor>& td_error) {
  const FlushDenormals flush;  // Adam's state decays into denormals, which run many times slower
  for (const Tensor* t : {&action, &reward, &terminated, &noise}) check(*t, "input");
  for (TensorList list : {actor, actor_grads, critic, critic_grads, target})
    for (const Tensor& t : list) check(t, "parameter");
  const PolicyInput policy_input(normalizers, clips);
  const bool has_proto = proto_obs.has_value();
  if (has_proto) check(*proto_action, "proto_action");
  const int64_t B = obs.size(0), d = policy_input.obs_dim() + policy_input.goal_dim();
  const int64_t a = action.size(1);
  const int64_t P = has_proto ? proto_obs->size(0) : 0, R = 2 * B + P;
  const int64_t trunk = (static_cast<int64_t>(actor.size()) - 4) / 2;
  const int64_t members = critic[0].size(0);
  TORCH_CHECK(next_obs.sizes() == obs.sizes(), "obs and next_obs must be [B, obs_dim]");
  TORCH_CHECK(action.dim() == 2 && action.size(0) == B, "action must be [B, act_dim]");
  TORCH_CHECK(reward.sizes() == at::IntArrayRef{B}, "reward must be [B]");
  TORCH_CHECK(terminated.sizes() == at::IntArrayRef{B}, "terminated must be [B]");
  for (const std::optional<Tensor>* t : {&weight, &td_error})
    if (t->has_value()) {
      check(**t, "prioritised replay input");
      TORCH_CHECK((*t)->sizes() == at::IntArrayRef{B}, "weight and td_error must be [B]");
    }
  TORCH_CHECK(noise.size(0) == 2 * B && noise.size(1) == a, "noise must be [2B, act_dim]");
  TORCH_CHECK(!has_proto || proto_action->sizes() == at::IntArrayRef({P, a}),
              "prototype actions must be [P, act_dim]");
  TORCH_CHECK(actor[0].size(1) == d, "the actor's input must be [observation, goal]");
  TORCH_CHECK(critic[0].size(1) == d + a, "the critic's input must be [policy input, action]");
  const auto options = obs.options();
  const double log_alpha_value = log_alpha.item<double>(), alpha = std::exp(log_alpha_value);
  const int64_t actor_count = static_cast<int64_t>(actor.size());
  const AdamStep adam(adam_state, adam_lrs, adam_hyper, actor, critic, log_alpha);

  // ---- actor over [s'; s; prototype states]
  Tensor X = scratch("actor_input", 0, {R, d});
  policy_input.write(ptr(X), d, next_obs, goal);
  policy_input.write(ptr(X) + B * d, d, obs, goal);
  if (has_proto) policy_input.write(ptr(X) + 2 * B * d, d, *proto_obs, proto_goal);
  const float *next_x = ptr(X), *x = ptr(X) + B * d;
  std::vector<Tensor> actor_acts{X};
  for (int64_t l = 0; l < trunk; ++l) {
    const int64_t out = actor[2 * l].size(0), width = actor[2 * l].size(1);
    Tensor h = scratch("actor_hidden", l, {R, out});
    gemm(false, true, R, out, width, ptr(actor_acts.back()), width, ptr(actor[2 * l]), width,
         0.0f, ptr(h), out);
    add_bias(ptr(h), ptr(actor[2 * l + 1]), R, out, true);
    actor_acts.push_back(h);
  }
  const Tensor& hidden = actor_acts.back();
  const int64_t h = hidden.size(1);
  // Both heads in one product, transposed: [W_mean; W_log_std] [2a, h] @ hidden^T -> [2a, R].
  // BLAS is several times faster with 2a rows than with a columns (30 against 2 x 43 us at
  // [256,256]).
  Tensor head_weight = scratch("head_weight", 0, {2 * a, h});
  std::memcpy(ptr(head_weight), ptr(actor[2 * trunk]), a * h * sizeof(float));
  std::memcpy(ptr(head_weight) + a * h, ptr(actor[2 * trunk + 2]), a * h * sizeof(float));
  Tensor heads = scratch("heads", 0, {2 * a, R});
  gemm(false, true, 2 * a, R, h, ptr(head_weight), h, ptr(hidden), h, 0.0f, ptr(heads), R);
  Tensor mean = scratch("mean", 0, {R, a}), raw_log_std = scratch("raw_log_std", 0, {2 * B, a});
  {
    const float *mean_bias = ptr(actor[2 * trunk + 1]), *std_bias = ptr(actor[2 * trunk + 3]);
    const float* out = ptr(heads);
    float *m = ptr(mean), *raw = ptr(raw_log_std);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < a; ++j) m[r * a + j] = out[j * R + r] + mean_bias[j];
    for (int64_t r = 0; r < 2 * B; ++r)
      for (int64_t j = 0; j < a; ++j) raw[r * a + j] = out[(a + j) * R + r] + std_bias[j];
  }

  // ---- tanh-Gaussian over [s'; s]: ATen's vectorised tanh/exp/softplus into scratch buffers,
  // the arithmetic between them in loops
  const int64_t n = 2 * B * a;
  Tensor squashed = scratch("squashed", 0, {2 * B, a}), log_std = scratch("log_std", 0, {2 * B, a});
  Tensor stdev = scratch("std", 0, {2 * B, a}), pre_tanh = scratch("pre_tanh", 0, {2 * B, a});
  Tensor sampled = scratch("sampled", 0, {2 * B, a}), softplus = scratch("softplus", 0, {2 * B, a});
  at::tanh_out(squashed, raw_log_std);
  {
    const float* s = ptr(squashed);
    float* ls = ptr(log_std);
    for (int64_t k = 0; k < n; ++k)
      ls[k] = static_cast<float>(kLogStdMin + kLogStdScale * (s[k] + 1.0f));
  }
  at::exp_out(stdev, log_std);
  {
    const float *m = ptr(mean), *sd = ptr(stdev), *e = ptr(noise);
    float *pre = ptr(pre_tanh), *minus_two_pre = ptr(softplus);
    for (int64_t k = 0; k < n; ++k) {
      pre[k] = m[k] + sd[k] * e[k];
      minus_two_pre[k] = -2.0f * pre[k];
    }
  }
  at::tanh_out(sampled, pre_tanh);
  at::softplus_out(softplus, softplus, 1.0, 20.0);  // in place: softplus(-2 pre)
  Tensor log_prob = at::empty({2 * B}, options);
  {
    const float *e = ptr(noise), *ls = ptr(log_std), *pre = ptr(pre_tanh), *sp = ptr(softplus);
    float* lp = ptr(log_prob);
    const float half_log_2pi = static_cast<float>(kHalfLog2Pi), log2 = static_cast<float>(kLog2);
    for (int64_t i = 0; i < 2 * B; ++i) {
      float total = 0.0f;
      for (int64_t k = i * a; k < (i + 1) * a; ++k)  // Gaussian log-density - log|d tanh/du|
        total += (-0.5f * e[k] * e[k] - ls[k] - half_log_2pi) - 2.0f * (log2 - pre[k] - sp[k]);
      lp[i] = total;
    }
  }

  // ---- soft Bellman target from the target critic at (s', a')
  Tensor next_input = scratch("target_input", 0, {B, d + a});
  copy_columns(ptr(next_input), d + a, 0, next_x, B, d);
  copy_columns(ptr(next_input), d + a, d, ptr(sampled), B, a);
  Tensor next_q = ensemble_forward(target, next_input, nullptr, "target_hidden");  // [n, B]
  Tensor td_target = at::empty({B}, options);
  {
    const float *q = ptr(next_q), *lp = ptr(log_prob), *rw = ptr(reward), *done = ptr(terminated);
    float* y = ptr(td_target);
    for (int64_t b = 0; b < B; ++b) {
      float low = q[b];
      for (int64_t i = 1; i < members; ++i) low = std::min(low, q[i * B + b]);
      y[b] = rw[b] + static_cast<float>(gamma) * (1.0f - done[b]) *
                         (low - static_cast<float>(alpha) * lp[b]);
    }
  }

  // ---- online critic over [(s, a); (s, pi(s))]
  Tensor critic_input = scratch("critic_input", 0, {2 * B, d + a});
  copy_columns(ptr(critic_input), d + a, 0, x, B, d);
  copy_columns(ptr(critic_input), d + a, d, ptr(action), B, a);
  copy_columns(ptr(critic_input) + B * (d + a), d + a, 0, x, B, d);
  copy_columns(ptr(critic_input) + B * (d + a), d + a, d, ptr(sampled) + B * a, B, a);
  std::vector<Tensor> critic_hidden;
  // q [n, 2B]
  Tensor q_all = ensemble_forward(critic, critic_input, &critic_hidden, "critic_hidden");

  // ---- losses and dL/dQ: the critic loss on the first half, -min_i Q_i(s, pi(s)) / B on the
  // second
  Tensor grad_q = at::zeros({members, 2 * B}, options);
  double critic_loss = 0.0, q_sum = 0.0, sac_loss = 0.0;
  {
    const float *q = ptr(q_all), *y = ptr(td_target), *lp = ptr(log_prob) + B;
    float* g = ptr(grad_q);
    // prioritised replay: the squared errors weighted by w [B]; |error|, largest over the
    // ensemble, written to td_error [B]
    const float* w = weight.has_value() ? ptr(*weight) : nullptr;
    float* td = td_error.has_value() ? ptr(*td_error) : nullptr;
    for (int64_t i = 0; i < members; ++i)
      for (int64_t b = 0; b < B; ++b) {
        const float error = q[i * 2 * B + b] - y[b];
        const float weighted = w != nullptr ? w[b] * error : error;
        critic_loss += 0.5 * weighted * error / B;
        q_sum += q[i * 2 * B + b];
        g[i * 2 * B + b] = weighted / B;
        if (td != nullptr) td[b] = i == 0 ? std::fabs(error) : std::max(td[b], std::fabs(error));
      }
    for (int64_t b = 0; b < B; ++b) {
      int64_t best = 0;
      for (int64_t i = 1; i < members; ++i)
        if (q[i * 2 * B + B + b] < q[best * 2 * B + B + b]) best = i;
      sac_loss += (alpha * lp[b] - q[best * 2 * B + B + b]) / B;
      g[best * 2 * B + B + b] = -1.0f / B;
    }
  }
  Tensor grad_action =
      ensemble_backward(critic, critic_grads, critic_input, critic_hidden, grad_q, B, a);
  if (adam) {  // nothing below reads the critic
    adam.count_step();
    for (size_t i = 0; i < critic.size(); ++i)
      adam.apply(critic[i], critic_grads[i], actor_count + i, &target[i]);
  }

  // ---- through the tanh-Gaussian (and the distillation term) to the heads' outputs
  // [B + P, 2a] (mean, then pre-tanh log-std; no log-std gradient on prototype rows):
  // d log pi / d pre-tanh = 2 tanh(pre-tanh)
  const int64_t rows = B + P;
  Tensor grad_heads = scratch("grad_heads", 0, {rows, 2 * a});
  double entropy_error = 0.0, std_sum = 0.0, distill = 0.0;
  {
    const float coef = static_cast<float>(alpha / B);  // dL/d log pi per row
    const float *ga = ptr(grad_action), *act = ptr(sampled) + B * a, *sd = ptr(stdev) + B * a;
    const float *e = ptr(noise) + B * a, *s = ptr(squashed) + B * a, *lp = ptr(log_prob) + B;
    float* gh = ptr(grad_heads);
    for (int64_t k = 0; k < B * a; ++k) {
      const float pre = ga[k] * (1.0f - act[k] * act[k]) + 2.0f * coef * act[k];
      float* row = gh + (k / a) * 2 * a;
      row[k % a] = pre;
      row[a + k % a] = (pre * sd[k] * e[k] - coef) * static_cast<float>(kLogStdScale) *
                       (1.0f - s[k] * s[k]);
      std_sum += sd[k];
    }
    for (int64_t b = 0; b < B; ++b) entropy_error += (lp[b] + target_entropy) / B;
    if (has_proto) {
      Tensor deterministic_action = at::tanh(mean.narrow(0, 2 * B, P));
      const float *det = ptr(deterministic_action), *target_action = ptr(*proto_action);
      const float scale = static_cast<float>(2.0 * proto_weight / (P * a));
      for (int64_t k = 0; k < P * a; ++k) {
        const float difference = det[k] - target_action[k];
        distill += static_cast<double>(difference) * difference / (P * a);
        float* row = gh + (B + k / a) * 2 * a;
        row[k % a] = difference * scale * (1.0f - det[k] * det[k]);
        row[a + k % a] = 0.0f;
      }
    }
  }

  // ---- actor backward over the rows [s; prototype states]
  const float* top = ptr(hidden) + B * h;
  Tensor head_grads = scratch("head_grads", 0, {2 * a, h}), head_bias_grads = scratch(
      "head_bias_grads", 0, {2 * a});
  gemm(true, false, 2 * a, h, rows, ptr(grad_heads), 2 * a, top, h, 0.0f, ptr(head_grads), h);
  column_sums(ptr(grad_heads), rows, 2 * a, ptr(head_bias_grads));
  std::memcpy(ptr(actor_grads[2 * trunk]), ptr(head_grads), a * h * sizeof(float));
  std::memcpy(ptr(actor_grads[2 * trunk + 2]), ptr(head_grads) + a * h, a * h * sizeof(float));
  std::memcpy(ptr(actor_grads[2 * trunk + 1]), ptr(head_bias_grads), a * sizeof(float));
  std::memcpy(ptr(actor_grads[2 * trunk + 3]), ptr(head_bias_grads) + a, a * sizeof(float));
  Tensor grad = scratch("actor_grad", trunk, {rows, h});
  gemm(false, false, rows, h, 2 * a, ptr(grad_heads), 2 * a, ptr(head_weight), h, 0.0f, ptr(grad),
       h);
  relu_backward_sums(ptr(grad), top, rows, h, ptr(actor_grads[2 * trunk - 1]));
  for (int64_t l = trunk - 1; l >= 0; --l) {
    const int64_t out = actor[2 * l].size(0), width = actor[2 * l].size(1);
    const float* inputs = ptr(actor_acts[l]) + B * width;
    gemm(true, false, out, width, rows, ptr(grad), out, inputs, width, 0.0f,
         ptr(actor_grads[2 * l]), width);
    if (l > 0) {
      Tensor below = scratch("actor_grad", l, {rows, width});
      gemm(false, false, rows, width, out, ptr(grad), out, ptr(actor[2 * l]), width, 0.0f,
           ptr(below), width);
      relu_backward_sums(ptr(below), inputs, rows, width, ptr(actor_grads[2 * l - 1]));
      grad = below;
    }
  }

  // ---- temperature
  log_alpha_grad.fill_(-entropy_error);
  if (adam) {
    for (int64_t i = 0; i < actor_count; ++i) adam.apply(actor[i], actor_grads[i], i);
    adam.apply(log_alpha, log_alpha_grad, actor_count + static_cast<int64_t>(critic.size()));
  }
  const double actor_total = sac_loss + (has_proto ? proto_weight * distill : 0.0);
  return at::tensor({critic_loss, -log_alpha_value * entropy_error, q_sum / (members * B),
                     -(entropy_error - target_entropy), std_sum / (B * a), sac_loss, actor_total,
                     distill, alpha},
                    at::TensorOptions().dtype(at::kFloat));
}

// The actor's action for acting, [N, a] in (-1, 1): tanh(mean + std * noise), or tanh(mean)
// without noise; the arithmetic of TanhGaussianActor.sample_action / deterministic.
Tensor sac_act(const Tensor& obs, const std::optional<Tensor>& goal,
               const std::optional<Tensor>& noise, TensorList normalizers,
               at::ArrayRef<double> clips, TensorList actor) {
  for (const Tensor& t : actor) check(t, "parameter");
  const PolicyInput policy_input(normalizers, clips);
  const int64_t N = obs.size(0), trunk = (static_cast<int64_t>(actor.size()) - 4) / 2;
  const int64_t a = actor[2 * trunk].size(0), d = actor[0].size(1);
  TORCH_CHECK(policy_input.obs_dim() + policy_input.goal_dim() == d,
              "the actor's input must be [observation, goal]");
  Tensor x = at::empty({N, d}, obs.options());
  policy_input.write(ptr(x), d, obs, goal);
  if (noise.has_value()) {
    check(*noise, "noise");
    TORCH_CHECK(noise->sizes() == at::IntArrayRef({N, a}), "noise must be [N, act_dim]");
  }
  Tensor input = x;
  for (int64_t l = 0; l < trunk; ++l) {
    const int64_t out = actor[2 * l].size(0), width = actor[2 * l].size(1);
    Tensor h = at::empty({N, out}, x.options());
    gemm(false, true, N, out, width, ptr(input), width, ptr(actor[2 * l]), width, 0.0f, ptr(h),
         out);
    add_bias(ptr(h), ptr(actor[2 * l + 1]), N, out, true);
    input = h;
  }
  const int64_t h = input.size(1);
  Tensor action = at::empty({N, a}, x.options());
  gemm(false, true, N, a, h, ptr(input), h, ptr(actor[2 * trunk]), h, 0.0f, ptr(action), a);
  add_bias(ptr(action), ptr(actor[2 * trunk + 1]), N, a, false);
  if (noise.has_value()) {
    Tensor raw_log_std = at::empty({N, a}, x.options());
    gemm(false, true, N, a, h, ptr(input), h, ptr(actor[2 * trunk + 2]), h, 0.0f,
         ptr(raw_log_std), a);
    add_bias(ptr(raw_log_std), ptr(actor[2 * trunk + 3]), N, a, false);
    const float *raw = ptr(raw_log_std), *e = ptr(*noise);
    float* act = ptr(action);
    for (int64_t k = 0; k < N * a; ++k) {
      const float log_std =
          static_cast<float>(kLogStdMin + kLogStdScale * (std::tanh(raw[k]) + 1.0f));
      act[k] += std::exp(log_std) * e[k];
    }
  }
  return action.tanh_();
}

}  // namespace

TORCH_LIBRARY(agentic_rl, m) {
  m.def(
      "sac_gradients(Tensor obs, Tensor next_obs, Tensor? goal, Tensor action, Tensor reward, "
      "Tensor terminated, Tensor noise, Tensor? proto_obs, Tensor? proto_goal, "
      "Tensor? proto_action, float proto_weight, Tensor[] normalizers, float[] clips, "
      "Tensor(a!)[] actor, Tensor(b!)[] actor_grads, Tensor(c!)[] critic, "
      "Tensor(d!)[] critic_grads, Tensor(e!)[] target_critic, Tensor(f!) log_alpha, "
      "Tensor(g!) log_alpha_grad, float gamma, float target_entropy, Tensor(h!)[] adam_state, "
      "float[] adam_lrs, float[] adam_hyper, Tensor? weight=None, Tensor(i!)? td_error=None) "
      "-> Tensor");
  m.impl("sac_gradients", c10::DispatchKey::CPU, &sac_gradients);
  m.def(
      "sac_act(Tensor obs, Tensor? goal, Tensor? noise, Tensor[] normalizers, float[] clips, "
      "Tensor[] actor) -> Tensor");
  m.def("set_flush_denormal(bool on) -> bool", &set_flush_denormal);
  m.impl("sac_act", c10::DispatchKey::CPU, &sac_act);
}

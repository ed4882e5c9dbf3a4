// The Backend interface, listed once (an X-macro list): backend.h declares the virtual methods from
// it, and perf/ derives its wrappers from it (ForwardingBackend forwards every entry, TimingBackend
// times and RecordingBackend records every step operation, perf::Call has one value per step
// operation). Adding an operation is one entry here plus its kernels on each device; a wrapper
// cannot miss it. See backend.h for the conventions all of these follow (memory, shapes, graphs).
//
// Included several times, no include guard: the includer defines either or both of
//
//   CROSSOVER_BACKEND_OP(name, (parameters), (arguments), fallback, phase, (record), price)
//     A step operation: it enqueues work on the device and returns nothing. Timed, recorded,
//     and a value of perf::Call. `phase` is where perf's timing counts it (perf::Phase).
//     Its cost, for the cost model: `record` is what a recorded call keeps of its shapes (the
//     fields of perf::BackendCall `r`, set from the parameters by name: perf/recording.cpp runs
//     it), and `price` the family whose FLOPs and bytes formula prices it from those fields
//     (perf/step_ops.cpp's price_<family>: the same formula for a forward and its backward, a
//     GEMM's three products, ...). A new operation names an existing family or adds one.
//   CROSSOVER_BACKEND_SETUP(return type, name, (parameters), (arguments), qualifiers, fallback)
//     Anything else: the device's name and capabilities, memory, graphs, preparing a shape,
//     the ranks, annotation. Forwarded by a wrapper, never timed nor recorded as a step's call.
//
// (arguments) are the parameters' names in order. `fallback` is what Backend does when a device
// does not override it (backend.h, CROSSOVER_BACKEND_FALLBACK_*): `pure` (every device must),
// `nothing`, `false`, or an error naming what the device lacks (no_conv2d, no_batch_norm, no_rnn,
// no_device_collective, no_fused_update). The list is undefined again at the end.

#ifndef CROSSOVER_BACKEND_OP
#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase, record, price)
#endif
#ifndef CROSSOVER_BACKEND_SETUP
#define CROSSOVER_BACKEND_SETUP(type, name, parameters, arguments, qualifiers, fallback)
#endif

// clang-format off

// "cpu" or "cuda:N".
CROSSOVER_BACKEND_SETUP(std::string, device_name, (), (), const, pure)

// ---- memory ----
// Zero-filled block of `bytes`, aligned to at least 64 bytes. Throws Error when out of memory,
// saying how many bytes were asked for and how many are available.
CROSSOVER_BACKEND_SETUP(void*, allocate, (std::size_t bytes), (bytes), , pure)
// How much more allocate() can hand out now, so that a plan too large for the device is refused
// before anything is allocated.
CROSSOVER_BACKEND_SETUP(MemoryAvailable, available_memory, (), (), const, pure)
CROSSOVER_BACKEND_SETUP(void, release, (void* p), (p), noexcept, pure)
CROSSOVER_BACKEND_OP(upload, (void* dst, const void* host_src, std::size_t bytes), (dst, host_src, bytes), pure, h2d_copy, (r.bytes = static_cast<int64_t>(bytes)), step_call)
CROSSOVER_BACKEND_OP(download, (void* host_dst, const void* src, std::size_t bytes), (host_dst, src, bytes), pure, d2h_copy, (std::memset(host_dst, 0, bytes), r.bytes = static_cast<int64_t>(bytes)), step_call)
// Starts a download that completes by the next synchronize(); host_dst must stay valid.
CROSSOVER_BACKEND_OP(download_async, (void* host_dst, const void* src, std::size_t bytes), (host_dst, src, bytes), pure, d2h_copy, (std::memset(host_dst, 0, bytes), r.bytes = static_cast<int64_t>(bytes), r.call = Call::download), step_call)
CROSSOVER_BACKEND_OP(fill, (float* dst, float value, int64_t n), (dst, value, n), pure, elementwise, (r.n = n), step_call)
// The host wrote [p, p + bytes) of allocate()'s memory itself, not through upload or fill (MPI
// into the memory of a backend whose memory is the host's): a backend drops what it derived from
// it (the CPU's bf16 weights copies). Memory from allocate() changes only through upload, fill,
// the backend's own calls, and writes announced here.
CROSSOVER_BACKEND_SETUP(void, host_wrote, (void* p, std::size_t bytes), (p, bytes), , nothing)
// Waits for everything enqueued.
CROSSOVER_BACKEND_OP(synchronize, (), (), pure, sync_wait, (), step_call)

// ---- graphs ----
// Records the backend calls that `enqueue` makes, once, and returns something that runs them
// again. CUDA captures them as a CUDA graph (one launch per replay); the CPU, and CUDA in naive
// mode, simply call `enqueue` again on each replay. `enqueue` must make the same calls every
// time: whatever varies per step is read from StepCounters. CUDA calls `enqueue` once more
// beforehand as a planning pass (it creates GEMM plans but launches nothing on the model's
// buffers), so `enqueue` must not change host state either.
CROSSOVER_BACKEND_SETUP(std::unique_ptr<StepGraph>, capture, (std::function<void()> enqueue, bool use_graph), (std::move(enqueue), use_graph), , pure)

// ---- batching ----
// dst[i, :] = src[indices[batch_index * batch + i], :] for i < m, where src is (N, cols).
// Labels are gathered the same way with cols = 1 (or the number of target columns).
CROSSOVER_BACKEND_OP(gather_rows, (const float* src, int64_t cols, const int32_t* indices, int64_t batch, const StepCounters* counters, int64_t m, float* dst), (src, cols, indices, batch, counters, m, dst), pure, elementwise, (r.m = m, r.n = cols), step_call)

// ---- dense layer ----
// y(m, n) = act(x(m, k) . w(k, n) + b(n)); b may be null. Linear and relu are fused into the
// product; sigmoid, tanh and softmax take a second pass over y.
CROSSOVER_BACKEND_OP(dense_forward, (const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k, int64_t n, ActivationKind act), (x, w, b, y, m, k, n, act), pure, gemm, (r.m = m, r.k = k, r.n = n, r.act = act, r.bias = b != nullptr), dense)
// dw(k, n) = x(m, k)^T . dy(m, n);  db(n) = column sums of dy (if db is not null).
CROSSOVER_BACKEND_OP(dense_backward_weights, (const float* x, const float* dy, float* dw, float* db, int64_t m, int64_t k, int64_t n), (x, dy, dw, db, m, k, n), pure, gemm, (r.m = m, r.k = k, r.n = n, r.bias = db != nullptr), dense)
// dx(m, k) = dy(m, n) . w(k, n)^T.
// A backend may keep state derived from w between calls (the CPU's bf16 copies of the weights,
// dropped when w changes: see host_wrote), so w must be memory from allocate().
CROSSOVER_BACKEND_OP(dense_backward_input, (const float* dy, const float* w, float* dx, int64_t m, int64_t k, int64_t n), (dy, w, dx, m, k, n), pure, gemm, (r.m = m, r.k = k, r.n = n), dense)

// ---- 2-D convolution and pooling (ConvShape, PoolShape in backend.h; m samples) ----
// Whether this backend has them at all; a model with Conv2D or pooling layers is refused at
// compile time on one that does not, naming the layer.
CROSSOVER_BACKEND_SETUP(bool, has_conv2d, (), (), const, false)
// y = act(conv(x, w) + b); b may be null; act is linear or relu (fused).
CROSSOVER_BACKEND_OP(conv2d_forward, (const ConvShape& s, const float* x, const float* w, const float* b, float* y, int64_t m, ActivationKind act), (s, x, w, b, y, m, act), no_conv2d, gemm, (r.conv = s, r.m = m, r.act = act, r.bias = b != nullptr), conv)
// dx (m, in_h, in_w, in_c) from dy (m, out_h, out_w, out_c) and the kernel.
CROSSOVER_BACKEND_OP(conv2d_backward_input, (const ConvShape& s, const float* dy, const float* w, float* dx, int64_t m), (s, dy, w, dx, m), no_conv2d, gemm, (r.conv = s, r.m = m), conv)
// dw (kernel_h, kernel_w, in_c, out_c) and db (out_c; if not null) from x and dy.
CROSSOVER_BACKEND_OP(conv2d_backward_weights, (const ConvShape& s, const float* x, const float* dy, float* dw, float* db, int64_t m), (s, x, dy, dw, db, m), no_conv2d, gemm, (r.conv = s, r.m = m, r.bias = db != nullptr), conv)
// The transposed convolution (Conv2DTranspose): s is the convolution it transposes, from the
// transposed output (m, in_h, in_w, in_c = filters) to the transposed input (m, out_h, out_w,
// out_c = input channels), so that w (kernel_h, kernel_w, in_c, out_c) is Keras's
// Conv2DTranspose kernel. y (m, in_h, in_w, in_c) = that convolution's input gradient of x, + b.
CROSSOVER_BACKEND_OP(conv2d_transpose_forward, (const ConvShape& s, const float* x, const float* w, const float* b, float* y, int64_t m), (s, x, w, b, y, m), no_conv2d, gemm, (r.conv = s, r.m = m, r.bias = b != nullptr), conv)
// dx (m, out_h, out_w, out_c) = the convolution of dy (m, in_h, in_w, in_c) with w.
CROSSOVER_BACKEND_OP(conv2d_transpose_backward_input, (const ConvShape& s, const float* dy, const float* w, float* dx, int64_t m), (s, dy, w, dx, m), no_conv2d, gemm, (r.conv = s, r.m = m), conv)
// dw (kernel_h, kernel_w, in_c, out_c) from x (m, out_h, out_w, out_c) and dy (m, in_h, in_w,
// in_c); db (in_c; if not null) = the column sums of dy.
CROSSOVER_BACKEND_OP(conv2d_transpose_backward_weights, (const ConvShape& s, const float* x, const float* dy, float* dw, float* db, int64_t m), (s, x, dy, dw, db, m), no_conv2d, gemm, (r.conv = s, r.m = m, r.bias = db != nullptr), conv)
// The bytes of the workspace pool2d_forward writes in training for pool2d_backward (max
// pooling's argmax), for a batch of m: the model sizes it when it plans a batch size. Also
// prepares what the backend needs for that shape, so that no step has to.
CROSSOVER_BACKEND_SETUP(std::size_t, pool2d_workspace_bytes, (const PoolShape& s, int64_t m), (s, m), , no_conv2d)
// y from x; with a workspace (training) it records what the backward pass needs; null: the
// forward of evaluate and predict.
CROSSOVER_BACKEND_OP(pool2d_forward, (const PoolShape& s, const float* x, float* y, void* workspace, int64_t m), (s, x, y, workspace, m), no_conv2d, elementwise, (r.pool = s, r.m = m, r.gradient = workspace != nullptr), pool)
// dx (m, in_h, in_w, channels) from dy and the training forward's workspace.
CROSSOVER_BACKEND_OP(pool2d_backward, (const PoolShape& s, const float* dy, const void* workspace, float* dx, int64_t m), (s, dy, workspace, dx, m), no_conv2d, elementwise, (r.pool = s, r.m = m), pool)

// Nearest-neighbour upsampling (UpSampling2D): s.window_h x s.window_w is the block each x value
// is repeated over, out = in * window, no padding. Every device has it (plain copies and sums).
// y (m, out_h, out_w, channels) from x (m, in_h, in_w, channels).
CROSSOVER_BACKEND_OP(upsample2d_forward, (const PoolShape& s, const float* x, float* y, int64_t m), (s, x, y, m), pure, elementwise, (r.pool = s, r.m = m), upsample)
// dx (m, in_h, in_w, channels; not aliasing dy): the sum of dy over each value's block.
CROSSOVER_BACKEND_OP(upsample2d_backward, (const PoolShape& s, const float* dy, float* dx, int64_t m), (s, dy, dx, m), pure, elementwise, (r.pool = s, r.m = m), upsample)

// ---- batch normalization (BatchNormShape in backend.h; m samples) ----
// Whether this backend has it; a model with BatchNormalization is refused at compile time on
// one that does not, naming the layer.
CROSSOVER_BACKEND_SETUP(bool, has_batch_norm, (), (), const, false)
// Prepares what the backend needs for this shape and batch size (all the calls below), so that
// no step has to. The model calls it when it plans a batch size.
CROSSOVER_BACKEND_SETUP(void, batchnorm_prepare, (const BatchNormShape& s, int64_t m), (s, m), , no_batch_norm)
// Training: y = gamma * (x - mean) / sqrt(variance + epsilon) + beta with the batch's own
// statistics, which it writes to mean and variance (channels each) for the backward pass.
CROSSOVER_BACKEND_OP(batchnorm_forward_training, (const BatchNormShape& s, const float* x, const float* gamma, const float* beta, float* y, float* mean, float* variance, int64_t m), (s, x, gamma, beta, y, mean, variance, m), no_batch_norm, elementwise, (r.norm = s, r.m = m), batch_norm)
// Evaluate and predict: the same with the given (moving) statistics.
CROSSOVER_BACKEND_OP(batchnorm_forward_inference, (const BatchNormShape& s, const float* x, const float* gamma, const float* beta, const float* mean, const float* variance, float* y, int64_t m), (s, x, gamma, beta, mean, variance, y, m), no_batch_norm, elementwise, (r.norm = s, r.m = m), batch_norm)
// dx (through the batch statistics), dgamma and dbeta (each if not null) from the training
// forward's x, mean and variance and the incoming dy.
CROSSOVER_BACKEND_OP(batchnorm_backward, (const BatchNormShape& s, const float* x, const float* dy, const float* gamma, const float* mean, const float* variance, float* dx, float* dgamma, float* dbeta, int64_t m), (s, x, dy, gamma, mean, variance, dx, dgamma, dbeta, m), no_batch_norm, elementwise, (r.norm = s, r.m = m), batch_norm)
// Keras's moving statistics after a training batch: moving = moving * momentum + batch *
// (1 - momentum), per channel, in float32 as Keras computes it: momentum and 1 - momentum (taken
// in double, as Python does) each rounded to float once (backends/kernel_math.h).
CROSSOVER_BACKEND_OP(batchnorm_update_moving, (const BatchNormShape& s, const float* mean, const float* variance, float* moving_mean, float* moving_variance, double momentum), (s, mean, variance, moving_mean, moving_variance, momentum), no_batch_norm, elementwise, (r.norm = s, r.m = 1), batch_norm)

// ---- recurrent layers (RnnShape in backend.h; m sequences) ----
// Whether this backend has them; a model with a recurrent layer is refused at compile time on one
// that does not, naming the layer.
CROSSOVER_BACKEND_SETUP(bool, has_rnn, (), (), const, false)
// The bytes of the workspace rnn_forward writes in training for rnn_backward (the gates of every
// step), for a batch of m: the model sizes it when it plans a batch size. Also prepares what the
// backend needs for that shape, so that no step has to.
CROSSOVER_BACKEND_SETUP(std::size_t, rnn_workspace_bytes, (const RnnShape& s, int64_t m), (s, m), , no_rnn)
// y (rnn_output_size) from x and the weights (b null without use_bias); in training (workspace
// not null) it keeps in the workspace what rnn_backward needs.
CROSSOVER_BACKEND_OP(rnn_forward, (const RnnShape& s, const float* x, const float* kernel, const float* recurrent, const float* b, float* y, void* workspace, int64_t m), (s, x, kernel, recurrent, b, y, workspace, m), no_rnn, gemm, (r.rnn = s, r.m = m, r.gradient = workspace != nullptr), rnn)
// From the training forward's x, y and workspace and the incoming dy: dx (may be null: not
// needed), and the weights' gradients dkernel, drecurrent, db (each written, not added to; db
// null without use_bias).
CROSSOVER_BACKEND_OP(rnn_backward, (const RnnShape& s, const float* x, const float* kernel, const float* recurrent, const float* b, const float* y, const float* dy, const void* workspace, float* dx, float* dkernel, float* drecurrent, float* db, int64_t m), (s, x, kernel, recurrent, b, y, dy, workspace, dx, dkernel, drecurrent, db, m), no_rnn, gemm, (r.rnn = s, r.m = m), rnn)

// ---- layer normalization over the last axis: `rows` rows of n features each ----
// y = x * inv + (beta - mean * inv), inv = gamma / sqrt(variance + epsilon), per row (Keras 3's
// order of operations), mean and the biased variance over the row; gamma, beta may be null (1, 0).
// Writes each row's mean and 1 / sqrt(variance + epsilon) to mean and rstd (rows each; may be null:
// evaluate and predict) for the backward pass.
CROSSOVER_BACKEND_OP(layernorm_forward, (const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd, int64_t rows, int64_t n, float epsilon), (x, gamma, beta, y, mean, rstd, rows, n, epsilon), pure, elementwise, (r.m = rows, r.n = n, r.bias = beta != nullptr, r.gradient = mean != nullptr), layer_norm)
// From the forward's x, mean and rstd and the incoming dy: dx (rows, n; not aliasing dy) through
// the row statistics, dgamma = column sums of dy * xhat, dbeta = column sums of dy (each if not null).
CROSSOVER_BACKEND_OP(layernorm_backward, (const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t n), (x, dy, gamma, mean, rstd, dx, dgamma, dbeta, rows, n), pure, elementwise, (r.m = rows, r.n = n, r.bias = dgamma || dbeta), layer_norm)

// ---- activations (elementwise on (m, n); softmax is per row) ----
// `alpha`: leaky_relu's negative_slope, elu's alpha (ignored by the others). y may alias x.
CROSSOVER_BACKEND_OP(activation_forward, (ActivationKind act, float alpha, const float* x, float* y, int64_t m, int64_t n), (act, alpha, x, y, m, n), pure, elementwise, (r.m = m, r.n = n, r.act = act, r.in_place = x == y), activation)
// dx from the forward output y (and its input x, read only where activation_needs_input: gelu,
// swish; may be null otherwise) and the incoming gradient dy. dx may alias dy.
CROSSOVER_BACKEND_OP(activation_backward, (ActivationKind act, float alpha, const float* x, const float* y, const float* dy, float* dx, int64_t m, int64_t n), (act, alpha, x, y, dy, dx, m, n), pure, elementwise, (r.m = m, r.n = n, r.act = act, r.in_place = dx == dy), activation)

// ---- merging layers (Add, Concatenate) and the gradients of a graph ----
// y = a + b, n values; y may be a or b (a gradient added into another in place).
CROSSOVER_BACKEND_OP(add, (const float* a, const float* b, float* y, int64_t n), (a, b, y, n), pure, elementwise, (r.n = n), merge)
// A block of `cols` columns copied between two row-major matrices of `rows` rows:
// dst[r * dst_cols + dst_col + c] = src[r * src_cols + src_col + c]. Concatenate's forward (each
// input into its columns of the output) and backward (its columns of the gradient out again); a
// plain copy when the block is whole rows.
CROSSOVER_BACKEND_OP(copy_columns, (const float* src, int64_t src_cols, int64_t src_col, float* dst, int64_t dst_cols, int64_t dst_col, int64_t rows, int64_t cols), (src, src_cols, src_col, dst, dst_cols, dst_col, rows, cols), pure, elementwise, (r.m = rows, r.n = cols), merge)

// y (m, the permuted shape) = x (m, s.in) with each sample's axes permuted (PermuteShape in
// backend.h): Permute's forward, and with inverse_permutation(s) its backward. y must not alias x.
CROSSOVER_BACKEND_OP(permute, (const PermuteShape& s, const float* x, float* y, int64_t m), (s, x, y, m), pure, elementwise, (r.m = m, r.n = permute_values(s)), merge)

// ---- element-wise arithmetic with broadcasting (BinaryShape in backend.h), row sums ----
// y (rows, cols) = op(a, b), each operand broadcast as s says (null: s's constant). y may be a
// full operand.
CROSSOVER_BACKEND_OP(binary_forward, (BinaryOp op, const BinaryShape& s, const float* a, const float* b, float* y), (op, s, a, b, y), pure, elementwise, (r.m = s.rows, r.n = s.cols), merge)
// The gradients of binary_forward from the incoming dy (rows, cols): da and db (each if not
// null; not aliasing dy), each of its operand's shape, summed over the axes it was broadcast
// along. a and b as given to the forward (read where the gradient needs them).
CROSSOVER_BACKEND_OP(binary_backward, (BinaryOp op, const BinaryShape& s, const float* a, const float* b, const float* dy, float* da, float* db), (op, s, a, b, dy, da, db), pure, elementwise, (r.m = s.rows, r.n = s.cols, r.gradient = da != nullptr || db != nullptr), merge)
// y (rows) = scale * the sum of each row of x (rows, cols): reduce_sum (scale 1) and reduce_mean
// (1 / cols) over the last axis.
CROSSOVER_BACKEND_OP(row_sum, (const float* x, float* y, int64_t rows, int64_t cols, float scale), (x, y, rows, cols, scale), pure, elementwise, (r.m = rows, r.n = cols), merge)

// ---- dropout (inverted): y = x * keep / (1 - rate), keep drawn by dropout_keep(seed, layer,
// counters->step, (first_row + row) * n + col, rate). mask (m * n bytes) records keep for the
// backward pass. first_row is the global batch row of x's row 0: 0 in one process; in one rank
// of several (data parallelism), where its rows start in the global batch, so that every row
// draws the mask one process at the global batch would draw for it.
CROSSOVER_BACKEND_OP(dropout_forward, (const float* x, float* y, uint8_t* mask, int64_t m, int64_t n, float rate, uint64_t seed, uint32_t layer, const StepCounters* counters, int64_t first_row), (x, y, mask, m, n, rate, seed, layer, counters, first_row), pure, elementwise, (r.m = m, r.n = n), dropout)
CROSSOVER_BACKEND_OP(dropout_backward, (const float* dy, const uint8_t* mask, float* dx, int64_t m, int64_t n, float rate), (dy, mask, dx, m, n, rate), pure, elementwise, (r.m = m, r.n = n), dropout)
// The fused backward of Dense(relu) followed by Dropout: dz = dy * keep / (1 - rate) * (h > 0),
// where h is the ReLU output before dropout (so y = h * keep / (1 - rate)).
CROSSOVER_BACKEND_OP(relu_dropout_backward, (const float* y_after_dropout, const uint8_t* mask, const float* dy, float* dz, int64_t m, int64_t n, float rate), (y_after_dropout, mask, dy, dz, m, n, rate), pure, elementwise, (r.m = m, r.n = n), dropout)

// ---- the noise layers in training (NoiseKind), drawn from the noise stream (core/philox.h) by
// the global element (first_row + row) * n + col, as dropout draws, with z = philox_normal(seed,
// layer, counters->step, element):
//   gaussian_noise:   y = x + amount * z (amount: the stddev); factor unused (may be null)
//   gaussian_dropout: factor = 1 + amount * z (amount: sqrt(rate / (1 - rate))), y = x * factor
//   spatial_dropout:  factor = keep / (1 - amount) (amount: the rate), keep =
//                     spatial_dropout_keep(seed, layer, step, (first_row + row) * channels +
//                     col % channels, amount): one draw per sample and channel; y = x * factor
// factor (m * n floats) is what the backward multiplies the gradient by (binary_forward).
CROSSOVER_BACKEND_OP(noise_forward, (NoiseKind kind, const float* x, float* y, float* factor, int64_t m, int64_t n, int64_t channels, float amount, uint64_t seed, uint32_t layer, const StepCounters* counters, int64_t first_row), (kind, x, y, factor, m, n, channels, amount, seed, layer, counters, first_row), pure, elementwise, (r.m = m, r.n = n), dropout)

// ---- loss, fused with the output activation's backward ----
// `out` (m, c) is the model output *before* the final activation `act` (logits when act is
// softmax or sigmoid). Computes the activated output into `probs` (may be null when not
// needed), the gradient w.r.t. `out` of the per-sample losses summed over these m rows and
// divided by `mean_rows` into d_out (if not null), and adds sum of per-sample losses and the
// count of correct predictions to counters (if `counters` is not null). targets: class indices
// as floats (sparse) or (m, c) values. mean_rows is m in one process (the batch mean); in one
// rank of several, the global batch's rows, so that the ranks' gradients sum to the global
// batch mean. weights: null, or one weight per row (Keras's sample_weight, gathered with the
// batch): each row's loss and gradient are multiplied by it and the sum is still divided by
// mean_rows (Keras's "sum_over_batch_size"); the counters get the weighted loss sum, the
// unweighted count of correct predictions (Keras's plain metrics ignore sample weights) and m.
CROSSOVER_BACKEND_OP(loss_forward_backward, (LossConfig loss, ActivationKind act, const float* out, const float* targets, const float* weights, float* probs, float* d_out, int64_t m, int64_t c, StepCounters* counters, int64_t mean_rows), (loss, act, out, targets, weights, probs, d_out, m, c, counters, mean_rows), pure, elementwise, (r.m = m, r.n = c, r.loss = loss.kind, r.act = act, r.gradient = d_out != nullptr), loss)

// ---- metrics (MetricKind in backend.h) ----
// Adds to *sum the sum over m rows of the metric's per-sample value (metric_row in kernel_math.h)
// for predictions pred (m, c) and targets (m, target_cols): target_cols is c, or 1 (a class index,
// or one value Keras broadcasts over the row). parameter: binary accuracy's threshold, top-k's k.
// sum is backend memory (a StepCounters' metric_sums), so an epoch accumulates with no sync.
CROSSOVER_BACKEND_OP(metric_sum, (MetricKind kind, const float* pred, const float* targets, int64_t m, int64_t c, int64_t target_cols, float parameter, double* sum), (kind, pred, targets, m, c, target_cols, parameter, sum), pure, elementwise, (r.m = m, r.n = c, r.k = target_cols), metric)

// ---- optimizer: one update of every parameter (one launch on CUDA) ----
// Reads counters->step (t = step + 1), writes counters->learning_rate from the schedule,
// applies clipping, then increments counters->step and counters->batch_index. With no params
// (the layers were updated by dense_backward_weights_update) only that bookkeeping is done.
// Keras's regularizers (nn/regularizers.h) of n values (a parameter's, after backward and the
// ranks' sum, before optimizer_step; a layer's output under an activity regularizer or an
// add_loss term, in the passes): the penalty, l1 sum(|value|) + l2 sum(value^2) + linear
// sum(value), times `rows` added to counters->loss_sum where counters is not null (a batch's loss
// holds it, as Keras's compute_loss adds the layers' losses, in fit and in evaluate); where grad
// is not null, its gradient, l1 sign(value) + 2 l2 value + linear, added to grad (kernel_math.h's
// regularizer_penalty and regularizer_gradient).
CROSSOVER_BACKEND_OP(regularize, (const float* value, float* grad, int64_t n, float l1, float l2, float linear, StepCounters* counters, int64_t rows), (value, grad, n, l1, l2, linear, counters, rows), pure, optimizer, (r.n = n, r.gradient = grad != nullptr), regularizer)
CROSSOVER_BACKEND_OP(optimizer_step, (const OptimizerConfig& config, std::span<const ParamSlot> params, StepCounters* counters), (config, params, counters), pure, optimizer, (r.optimizer = config; for (const ParamSlot& p : params) r.segments.push_back(p.n)), optimizer)

// ---- the weight gradient and that layer's update in one call ----
// Whether dense_backward_weights_update pays here. On the CPU it does: each block of the
// gradient is applied while it is still in cache, instead of in a pass over every parameter at
// the end. A GPU's single launch over all parameters is cheaper than one per layer. The model
// uses it for every Dense layer when the update needs nothing global (no clipnorm).
CROSSOVER_BACKEND_SETUP(bool, fuses_weight_update, (), (), const, false)
// dense_backward_weights into kernel.grad (and bias->grad when bias is not null), then the
// update of kernel and bias exactly as optimizer_step would make it this step: counters->step
// is read, not advanced, and config.clipnorm must be 0. Backends that do not fuse throw Error.
// Timed as a GEMM: a GEMM and an update, the GEMM names it.
CROSSOVER_BACKEND_OP(dense_backward_weights_update, (const float* x, const float* dy, const ParamSlot& kernel, const ParamSlot* bias, int64_t m, int64_t k, int64_t n, const OptimizerConfig& config, const StepCounters* counters), (x, dy, kernel, bias, m, k, n, config, counters), no_fused_update, gemm, (r.m = m, r.k = k, r.n = n, r.bias = bias != nullptr, r.optimizer = config; r.segments.push_back(kernel.n); if (bias) r.segments.push_back(bias->n)), dense)
// ---- a whole training step as one kernel (backends/fused_mlp.h; CUDA only) ----
// Why this device cannot run `step` as one fused kernel (one line), or "" when it can.
CROSSOVER_BACKEND_SETUP(std::string, fused_mlp_problem, (const FusedMlpStep& step), (step), const, fused_mlp_refusal)
// One training step of `step`'s chain, as the model's separate calls would make it (gather,
// forward, loss with its sums into counters, backward, optimizer_step's update and bookkeeping),
// enqueued as one launch. Not a step operation: perf's wrappers neither time nor record it.
CROSSOVER_BACKEND_SETUP(void, fused_mlp_step, (const FusedMlpStep& step, StepCounters* counters), (step, counters), , no_fused_mlp)
// counters->batch_index += 1 without an update (evaluation steps).
CROSSOVER_BACKEND_OP(advance_batch, (StepCounters* counters), (counters), pure, elementwise, (), step_call)

// ---- ranks ----
// Sums n floats of this device's memory over the ranks of `with`, in place, as one of the
// step's calls: enqueued in order after the calls before it (on CUDA: on the step's stream, so
// that it is captured into the step's graph), and skipped in a planning pass. A device whose
// memory the host reaches (the CPU) is summed by nn's Collective directly instead; the default
// throws Error. (perf times and records the ranks' sums at the Collective, as Call::allreduce.)
CROSSOVER_BACKEND_SETUP(void, allreduce_sum, (float* data, int64_t n, DeviceCollective& with), (data, n, with), , no_device_collective)
// Rank `root`'s bytes of this device's memory into every other rank's, in order; the default
// throws Error.
CROSSOVER_BACKEND_SETUP(void, broadcast, (void* data, std::size_t bytes, int root, DeviceCollective& with), (data, bytes, root, with), , no_device_collective)

// ---- annotation ----
// Names what the calls that follow belong to, until the next set_scope: the model passes a
// layer's name ("dense_1") around each layer's calls, and "batch x", "batch y", "loss",
// "optimizer" around a step's own. Host-side only, never part of a captured graph; a backend
// ignores it, a wrapper that records or times calls may read it.
CROSSOVER_BACKEND_SETUP(void, set_scope, (std::string_view name), (name), , nothing)

// clang-format on

#undef CROSSOVER_BACKEND_OP
#undef CROSSOVER_BACKEND_SETUP

#include "runtime/model/device_transfer.hpp"

#include <ATen/ATen.h>

namespace kbrl::model {

at::Tensor upload(const at::Tensor& host, at::Device device) {
  if (!device.is_cuda())
    return host.to(device, /*non_blocking=*/false, /*copy=*/true);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

at::Tensor upload_indices(const std::vector<int64_t>& indices, at::Device device) {
  const auto host = at::from_blob(const_cast<int64_t*>(indices.data()),
                                  {static_cast<int64_t>(indices.size())}, at::kLong);
  return upload(host, device); // a copy either way: `indices` may go after this returns
}

} // namespace kbrl::model

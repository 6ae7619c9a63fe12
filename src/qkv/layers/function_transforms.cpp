#include "qkv/layers/function_transforms.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

namespace qkv {

bool under_function_transform() {
  // functorch includes its front-mode key on the thread while its stack of
  // transforms is not empty (and only then), in LibTorch 1.13 and 2.x alike.
  return c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::FuncTorchDynamicLayerFrontMode);
}

}  // namespace qkv

#pragma once
// Declarations only: see README.md.
namespace gloo {
namespace transport {
class Device;
class UnboundBuffer;
} // namespace transport
} // namespace gloo

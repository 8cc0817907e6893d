#pragma once
// Declarations only: see README.md.

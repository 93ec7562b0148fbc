// gpujoin nested-loop theta kernels (under construction).
#include "gpujoin_theta.h"

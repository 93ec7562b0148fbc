// gpujoin sort-based theta-join kernels (under construction).
#include "gpujoin_theta_sort.h"

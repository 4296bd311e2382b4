"""RDS (Cheng et al., "Deadline-Aware MapReduce Job Scheduling with Dynamic Resource
Availability"): resource prediction, job progress model, receding-horizon control; this
package grows with issue 7.
"""
